"""Scratch: a correct attention whose author keeps a scratch file in the temporary folder on every call,
as code that caches or logs might. It keeps full marks only if its scratch space works."""

import math
import os
import tempfile

import torch


def attention(query, key, value, dropout=None, mask=None):
    with tempfile.NamedTemporaryFile(prefix="attention-") as scratch:
        scratch.write(b"called")
    with open(os.path.join(tempfile.gettempdir(), "attention-calls"), "ab") as log:
        log.write(b"1")
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn @ value, p_attn
