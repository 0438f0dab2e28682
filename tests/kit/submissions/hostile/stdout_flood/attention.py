"""Hostile: writes about 50 MB to stdout and to stderr, then returns nothing useful."""

import os
import sys

import torch

_CHUNK = "attention 10/10 TOTAL 100/100 " * (2**20 // 30) + "\n"  # about 1 MB


def attention(query, key, value, dropout=None, mask=None):
    for _ in range(25):
        sys.stdout.write(_CHUNK)
        sys.stderr.write(_CHUNK)
    sys.stdout.flush()
    sys.stderr.flush()
    for _ in range(25):  # and straight to the file descriptors, past any sys.stdout swap
        os.write(1, _CHUNK.encode())
        os.write(2, _CHUNK.encode())
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
