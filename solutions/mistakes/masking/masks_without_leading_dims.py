"""Returns both masks as (seq_len, seq_len), without the two leading broadcast dims."""

DIAGNOSIS = (
    "the masks are (seq_len, seq_len): return them as (1, 1, seq_len, seq_len) so they broadcast over "
    "batch and heads."
)

import torch


def causal_average(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return (weights / weights.sum(dim=1, keepdim=True)) @ x


def weight_mask_and_normalization(weight):
    tril = torch.tril(torch.ones_like(weight))
    return weight.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len))


def causal_mask(seq_len):
    return torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)
