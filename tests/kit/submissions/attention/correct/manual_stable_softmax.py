"""Scaled dot-product attention with a hand-written stable softmax (subtract the row max) and torch.where masking."""

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(key.size(-1))
    if mask is not None:
        scores = torch.where(mask != 0, scores, float("-inf"))
    exp = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    p_attn = exp / exp.sum(dim=-1, keepdim=True)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn @ value, p_attn
