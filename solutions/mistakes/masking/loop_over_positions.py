"""Averages with a Python loop over T: right values, but not vectorised (loses only the vectorisation points)."""

DIAGNOSIS = (
    "causal_average loops over the positions in Python: build the (T, T) averaging weights once and use "
    "one matrix product, weights @ x."
)

import torch


def causal_average(x):
    out = torch.empty_like(x)
    for t in range(x.size(1)):
        out[:, t] = x[:, : t + 1].mean(dim=1)
    return out


def weight_mask_and_normalization(weight):
    tril = torch.tril(torch.ones_like(weight))
    return weight.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
