"""Isolation: fills the sandbox's writable scratch space (/tmp and /dev/shm) until a write fails.

Both are memory-backed (tmpfs): without a cap, a submission could take the machine's memory this
way, which no rlimit of the worker counts. The message says how much it wrote in all (`wrote N bytes`).
It stops by itself at 384 MiB, well above the 256 MiB cap it looks for, so that it never harms the host.
"""

import contextlib
import errno
import os
import signal

import torch

MARKER = "KIT_ISOLATION_MARKER"
FILE_BYTES = 32 * 2**20
STOP_AT = 384 * 2**20
CHUNK = b"\xa5" * 2**20
FULL = (errno.ENOSPC, errno.EDQUOT, errno.ENOMEM)


def _written(folders):
    total = 0
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith(MARKER):
                    total += entry.stat().st_size
    return total


def _fill(folders):
    # Over the file-size limit a write fails with EFBIG instead of killing us with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    total = _written(folders)
    for folder in folders:
        for index in range(STOP_AT // FILE_BYTES + 1):
            if total >= STOP_AT:
                return total
            path = os.path.join(folder, f"{MARKER}-fill-{index:03d}")
            if os.path.exists(path):
                continue
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError:
                break
            full = False
            try:
                size = 0
                while size < FILE_BYTES and total < STOP_AT:
                    n = os.write(fd, CHUNK)
                    size += n
                    total += n
            except OSError as error:
                full = error.errno in FULL
            finally:
                os.close(fd)
            if full:
                break  # this folder is full: on to the next one
    return total


def attention(query, key, value, dropout=None, mask=None):
    wrote = _fill(["/tmp", "/dev/shm"])
    raise RuntimeError(f"wrote {wrote} bytes")
