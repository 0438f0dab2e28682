"""Takes the softmax over the queries (dim=-2) instead of over the keys (dim=-1)."""

DIAGNOSIS = (
    "your weights equal softmax over the query axis: use dim=-1, so each query's weights over the keys sum to 1."
)

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-2)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
