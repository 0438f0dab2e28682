"""Uses the dropped-out weights for the output but returns the weights from before dropout."""

DIAGNOSIS = (
    "the returned weights are those from before dropout: return the same dropped-out p_attn you multiply "
    "with value."
)

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = scores.softmax(dim=-1)
    dropped = dropout(p_attn) if dropout is not None else p_attn
    return torch.matmul(dropped, value), p_attn
