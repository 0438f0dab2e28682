"""Returns (p_attn, output) instead of (output, p_attn)."""

DIAGNOSIS = "the two results come back in the wrong order: return (output, p_attn)."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn, torch.matmul(p_attn, value)
