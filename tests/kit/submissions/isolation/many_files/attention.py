"""Isolation: fills the scratch tmpfs with empty files, which its size cap does not count.

Each file costs the kernel about a kilobyte of memory however small it is. The grader must stop the
worker (it allows 65536 files) and the next submission must find /tmp empty. At most 150,000 files.
"""

import os

import torch


def attention(query, key, value, dropout=None, mask=None):
    made = 0
    try:
        for folder in range(15):
            os.makedirs(f"/tmp/many-{folder}", exist_ok=True)
            for index in range(10_000):
                os.close(os.open(f"/tmp/many-{folder}/{index:06d}", os.O_CREAT | os.O_WRONLY, 0o600))
                made += 1
    except OSError:
        pass
    message = "made " + str(made) + " files"  # not in the raise line, which the report quotes
    raise RuntimeError(message)
