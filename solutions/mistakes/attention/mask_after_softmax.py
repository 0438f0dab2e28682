"""Zeroes blocked weights after the softmax, so the rows no longer sum to 1."""

DIAGNOSIS = (
    "blocked weights are zeroed after the softmax, so rows no longer sum to 1: fill the blocked scores "
    "with -inf before the softmax."
)

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        p_attn = p_attn.masked_fill(mask == 0, 0.0)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
