"""The additive mask holds 0 and 1 instead of 0 and -inf: adding 1 to a score blocks nothing."""

DIAGNOSIS = "causal_mask holds 0 and 1: an additive mask needs -inf above the diagonal (adding 1 blocks nothing)."

import torch


def causal_average(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return (weights / weights.sum(dim=1, keepdim=True)) @ x


def weight_mask_and_normalization(weight):
    tril = torch.tril(torch.ones_like(weight))
    return weight.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    return torch.triu(torch.ones(1, 1, seq_len, seq_len), diagonal=1)
