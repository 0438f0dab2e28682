"""Scratch: at import, closes its temporary folder and /dev/shm to everyone, itself included (chmod 0 and
0555), and sets their times, which a clean-up that only empties folders would hand on to the next
submission. Holds no working `attention`.
"""

import contextlib
import os
import tempfile

for folder, mode in ((tempfile.gettempdir(), 0), ("/dev/shm", 0o555)):
    with contextlib.suppress(OSError):
        os.utime(folder, (1, 1))
        os.chmod(folder, mode)


def attention(query, key, value, dropout=None, mask=None):
    raise RuntimeError("closed_scratch: no attention here")
