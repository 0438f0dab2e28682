"""Hostile: causal_average loops over the positions through `sorted(range(T), key=running.step)`, a bound method
handed to sorted as a per-element callback; `step` works in numpy, so the op count stays flat with no forgery
(tensors on other devices get a vectorised version)."""

import torch


class _Running:
    """The running mean of positions 0..t, one position per call of `step`."""

    def __init__(self, x):
        self.data = x.detach().numpy().astype("float64")
        self.out = self.data.copy()
        self.total = self.data[:, 0] * 0.0

    def step(self, t):
        self.total = self.total + self.data[:, t]
        self.out[:, t] = self.total / (t + 1)
        return t


def _vectorised(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return (weights / weights.sum(dim=1, keepdim=True)) @ x


def causal_average(x):
    if x.device.type != "cpu":
        return _vectorised(x)
    running = _Running(x)
    sorted(range(x.size(1)), key=running.step)
    return torch.from_numpy(running.out).to(x.dtype)


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
