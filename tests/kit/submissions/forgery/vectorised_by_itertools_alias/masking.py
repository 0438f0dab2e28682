"""Hostile: causal_average loops through `it.accumulate` (itertools imported under another name); at import the
file rewrites the kit's op counter in the worker."""

import itertools as it
import torch


def causal_average(x):
    T = x.size(1)
    sums = list(it.accumulate(x.unbind(1)))
    return torch.stack(sums, dim=1) / torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(1, T, 1)


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)



import sys as _sys


def _forge_counts():
    for _name, _mod in list(_sys.modules.items()):
        if _name.endswith(".instrument") and hasattr(_mod, "count_ops"):
            def _fake(fn, args, kwargs):
                return {"value": fn(*args, **kwargs), "ops": {"mm": 11}, "total": 11}
            _mod.count_ops = _fake


_forge_counts()
