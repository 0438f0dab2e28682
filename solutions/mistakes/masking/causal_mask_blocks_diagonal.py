"""The additive mask uses triu(diagonal=0), so the diagonal is -inf too and position 0 sees nothing."""

DIAGNOSIS = "causal_mask blocks the diagonal too: use triu(..., diagonal=1), so each position still sees itself."

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
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=0)
