"""Scratch: at import, nests folders 5000 deep in its temporary folder, deeper than Python's recursion
limit, so that a recursive clean-up fails on it. Holds no working `attention`.
"""

import contextlib
import os
import tempfile

DEPTH = 5000


def _nest(top: str) -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


with contextlib.suppress(OSError):
    _nest(tempfile.gettempdir())


def attention(query, key, value, dropout=None, mask=None):
    raise RuntimeError("deep_tree: no attention here")
