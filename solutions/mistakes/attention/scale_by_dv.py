"""Scales by the square root of the value width d_v instead of the key width d_k."""

DIAGNOSIS = "the scores are scaled by the value width d_v: scale by sqrt(d_k), the width of query and key."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_v = value.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_v)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
