"""Blocks with -1e9 instead of -inf (annotated-transformer style), an int look-ahead mask, einsum for the average."""

import torch


def causal_average(x):
    T = x.size(1)
    weights = torch.ones(T, T, dtype=x.dtype, device=x.device).tril()
    weights = weights / torch.arange(1, T + 1, dtype=x.dtype, device=x.device).unsqueeze(1)
    return torch.einsum("ts,bsc->btc", weights, x)


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    blocked = torch.triu(torch.ones(T, T, device=weight.device), diagonal=1).bool()
    return weight.masked_fill(blocked, -1e9).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.long).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((seq_len, seq_len), -1e9), diagonal=1).view(1, 1, seq_len, seq_len)
