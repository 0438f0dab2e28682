"""Hostile: allocates memory without bound inside attention(), 100 MB at a time."""

_hoard = []


def attention(query, key, value, dropout=None, mask=None):
    while True:
        # Repeating a nonzero byte writes every page, so the memory is really committed.
        _hoard.append(bytearray(b"\x01") * (100 * 2**20))
