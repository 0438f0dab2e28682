"""Hostile: never returns from attention()."""


def attention(query, key, value, dropout=None, mask=None):
    while True:
        pass
