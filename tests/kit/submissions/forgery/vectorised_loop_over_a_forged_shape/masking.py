"""Hostile: causal_average loops over the positions with `for _ in x.new_empty([1] * T).shape`, a loop over T that
reads as a loop over a shape; its body works in numpy, so the op count stays flat with no forgery (tensors on other
devices get a vectorised version)."""

import numpy as np
import torch


def _vectorised(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return (weights / weights.sum(dim=1, keepdim=True)) @ x


def causal_average(x):
    if x.device.type != "cpu":
        return _vectorised(x)
    data = x.detach().numpy().astype(np.float64)
    out = np.empty_like(data)
    total = np.zeros_like(data[:, 0])
    t = 0
    for _ in x.new_empty([1] * x.size(1)).shape:
        total = total + data[:, t]
        out[:, t] = total / (t + 1)
        t += 1
    return torch.from_numpy(out).to(x.dtype)


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
