"""Reads the mask backwards: blocks the keys marked True and keeps the ones marked False."""

DIAGNOSIS = "the mask is read backwards (True blocks): it is a keep mask, so block where mask == 0."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask != 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
