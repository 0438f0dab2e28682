"""Isolation: fills its own request pipe through a second write end, then stops reading.

The grader's next request then blocks in its write to the worker unless that write has a deadline;
grading must still end within the run's time budget.
"""

import fcntl
import os
import sys
import time

import torch


def _request_pipe():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            is_pipe = os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            continue
        if fd > 2 and is_pipe and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            return fd
    return None


def attention(query, key, value, dropout=None, mask=None):
    fd = _request_pipe()
    if fd is not None:
        try:
            writer = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            while True:
                os.write(writer, b"\0" * 4096)
        except OSError:  # full (BlockingIOError), or the reopen was refused
            pass
        protocol = sys.modules.get("gradeworker.protocol")
        if protocol is not None:
            protocol.read_message = lambda *args, **kwargs: time.sleep(10**6)
    raise RuntimeError("stalled")
