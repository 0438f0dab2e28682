"""Hostile: causal_average calls `_run`, an alias of a static method whose pure-Python loop the op count
cannot see; a reader that follows only function calls never opens the class."""

import torch


class _Helper:
    @staticmethod
    def run(x):
        rows = x.tolist()
        out = []
        for b in rows:
            acc = [0.0] * len(b[0])
            ob = []
            for t, v in enumerate(b):
                acc = [a + c for a, c in zip(acc, v)]
                ob.append([a / (t + 1) for a in acc])
            out.append(ob)
        return torch.tensor(out, dtype=x.dtype, device=x.device)


_run = _Helper.run


def causal_average(x):
    return _run(x)


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)

