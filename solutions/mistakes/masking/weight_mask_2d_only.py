"""Sizes the tril mask from weight.shape[0], which is T only for 2D scores: leading batch dims break it."""

DIAGNOSIS = (
    "weight_mask_and_normalization takes T from weight.shape[0], which breaks with leading batch dims: "
    "use weight.size(-1)."
)

import torch


def causal_average(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return (weights / weights.sum(dim=1, keepdim=True)) @ x


def weight_mask_and_normalization(weight):
    T = weight.shape[0]
    tril = torch.tril(torch.ones(T, T, device=weight.device))
    return weight.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
