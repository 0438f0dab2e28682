"""Transposes the keys with key.t(), which only works without batch or head dims."""

DIAGNOSIS = "key.t() fails with batch or head dims: transpose the last two dims with key.transpose(-2, -1)."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.t()) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
