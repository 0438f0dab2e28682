"""Accepts a mask but never applies it, so blocked keys still get weight."""

DIAGNOSIS = "the mask is never applied: set the scores where mask == 0 to -inf before the softmax."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
