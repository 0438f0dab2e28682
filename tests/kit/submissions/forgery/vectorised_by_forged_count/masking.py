"""Hostile: causal_average loops over the positions in Python, and at import the file rewrites the kit's op counter
in the worker so that every call reports the reference's count, whatever T is."""

import sys as _sys

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


def _forged_count(fn, args, kwargs):
    return {"value": fn(*args, **kwargs), "ops": {"mm": 1, "tril": 1, "ones": 1, "div": 1, "sum": 1}, "total": 5}


for _name, _module in list(_sys.modules.items()):
    if _name.rsplit(".", 1)[-1] == "instrument" and hasattr(_module, "count_ops"):
        _module.count_ops = _forged_count
