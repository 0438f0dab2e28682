"""Hostile: crashes the interpreter with a segmentation fault inside attention()."""

import ctypes


def attention(query, key, value, dropout=None, mask=None):
    ctypes.string_at(0)
    raise AssertionError("unreachable: reading address 0 should have crashed the process")
