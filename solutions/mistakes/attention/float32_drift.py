"""Casts everything to float32, so float64 inputs come back as float32."""

DIAGNOSIS = "float64 inputs come back as float32: keep the inputs' dtype, without .float() or dtype=torch.float32."

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    query, key, value = query.float(), key.float(), value.float()
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
