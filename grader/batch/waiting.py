"""`waiting` is how a slot waits without missing a word from the batch: its job lines, and its grading child."""

from __future__ import annotations

import os
import select
import time


class Lines:
    """The batch's lines on `fd`, read with a buffer of our own: whether a line is waiting is known exactly (a text
    file's buffer would hide a cancel from `select`)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self.closed = False  # the batch closed its end

    def fileno(self) -> int:
        return self._fd

    def waiting(self) -> bool:
        """Whether a line (or the end) is read already: `readline` returns without blocking."""
        return b"\n" in self._buffer or self.closed

    def readline(self) -> str:
        """The next line, blocking until it comes; "" once the batch closed its end."""
        while b"\n" not in self._buffer and not self.closed:
            chunk = os.read(self._fd, 65536)
            self._buffer += chunk
            self.closed = not chunk
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return (line + newline).decode("utf-8")


def exits_within(pid: int, seconds: float) -> bool:
    """Whether our child `pid` ends within `seconds` (left unreaped): a pidfd where the kernel has them (Linux)."""
    if hasattr(os, "pidfd_open"):
        pidfd = os.pidfd_open(pid)
        try:
            return bool(select.select([pidfd], [], [], seconds)[0])
        finally:
            os.close(pidfd)
    deadline = time.monotonic() + seconds
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
