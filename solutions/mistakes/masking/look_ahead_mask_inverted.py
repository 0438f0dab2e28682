"""The look-ahead mask marks the blocked future with 1 (triu) instead of the kept past and present."""

DIAGNOSIS = (
    "create_look_ahead_mask marks the future instead of the past: it is a keep mask, so use tril (1 on "
    "and below the diagonal)."
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
    return torch.triu(torch.ones(seq_len, seq_len), diagonal=1).unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
