"""Running sum over arange(1, T+1); torch.where masking; a bool keep mask; masked_fill for the additive one."""

import torch


def causal_average(x):
    T = x.size(1)
    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(1, T, 1)
    return x.cumsum(dim=1) / counts


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return torch.where(keep, weight, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    rows = torch.arange(seq_len).view(-1, 1)
    cols = torch.arange(seq_len).view(1, -1)
    return (cols <= rows)[None, None]


def causal_mask(seq_len):
    blocked = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)
    return torch.zeros(1, 1, seq_len, seq_len).masked_fill(blocked, float("-inf"))
