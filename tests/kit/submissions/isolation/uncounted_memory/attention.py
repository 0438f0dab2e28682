"""Isolation: holds memory where RLIMIT_DATA does not look (a shared mapping, a memfd, extended attributes,
System V shared memory and message queues, which would also outlive the worker for the next submission).

Each attempt is sized over the default memory limit (4 GiB) or stores data the tmpfs cap does not
count, but touches almost nothing, so that the host is safe even if the sandbox lets it through.
The message lists what succeeded (`held=[...]`).
"""

import ctypes
import mmap
import os

import torch

OVER_THE_LIMIT = 6 * 2**30


def attention(query, key, value, dropout=None, mask=None):
    held = []
    try:
        region = mmap.mmap(-1, OVER_THE_LIMIT)  # MAP_SHARED | MAP_ANONYMOUS: not "data"
        region[0] = 1
        held.append("shared-mapping")
        region.close()
    except (OSError, ValueError):
        pass
    try:
        os.close(os.memfd_create("KIT_ISOLATION_MARKER"))
        held.append("memfd")
    except OSError:
        pass
    try:
        with open("/tmp/xattr-carrier", "w"):
            pass
        os.setxattr("/tmp/xattr-carrier", "user.payload", b"x" * 4096)
        held.append("xattr")
    except OSError:
        pass
    libc = ctypes.CDLL(None)
    ipc_create = 0o1000 | 0o600
    if libc.shmget(0x4B17, 2**20, ipc_create) >= 0:
        held.append("sysv-shm")
    if libc.msgget(0x4B17, ipc_create) >= 0:
        held.append("sysv-msg")
    message = "held=[" + ", ".join(held) + "]"  # not in the raise line, which the report quotes
    raise RuntimeError(message)
