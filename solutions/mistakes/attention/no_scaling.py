"""Forgets to divide the scores by sqrt(d_k)."""

DIAGNOSIS = "the scores are not scaled: divide query @ key^T by sqrt(d_k)."

import torch


def attention(query, key, value, dropout=None, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
