"""Divides the running sum by T instead of t+1, so early positions are shrunk towards 0."""

DIAGNOSIS = "causal_average divides the running sum by T: divide row t by t + 1, the number of positions it averages."

import torch


def causal_average(x):
    T = x.size(1)
    return x.cumsum(dim=1) / T


def weight_mask_and_normalization(weight):
    tril = torch.tril(torch.ones_like(weight))
    return weight.masked_fill(tril == 0, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
