"""Scaled dot-product attention written with torch.einsum instead of matmul and transpose."""

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = torch.softmax(scores, dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.einsum("...qk,...kv->...qv", p_attn, value), p_attn
