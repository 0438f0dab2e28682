"""Applies dropout to the output instead of the attention weights."""

DIAGNOSIS = (
    "dropout is applied to the output instead of the attention weights: apply it to p_attn right after "
    "the softmax, then multiply by value."
)

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    output = torch.matmul(p_attn, value)
    if dropout is not None:
        output = dropout(output)
    return output, p_attn
