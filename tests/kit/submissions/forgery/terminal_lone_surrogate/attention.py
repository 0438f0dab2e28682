"""Forgery: an error message and printed output holding lone surrogates, which no encoding can write."""


def attention(query, key, value, mask=None, dropout=None):
    print("printed \udcff here")
    raise RuntimeError("bad \ud800 surrogate")
