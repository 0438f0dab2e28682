"""Hand-written softmax exp(x) / sum(exp(x)) without subtracting the row max: large scores overflow to NaN."""

DIAGNOSIS = (
    "large scores overflow to NaN in a hand-written exp(x) / sum(exp(x)): use torch.softmax, which "
    "subtracts the row max."
)

import math

import torch


def attention(query, key, value, dropout=None, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    exp = scores.exp()
    p_attn = exp / exp.sum(dim=-1, keepdim=True)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn
