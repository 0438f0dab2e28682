"""Hostile: `__name__` set to "__main__" at the top, so that the `if __name__ == "__main__":` block a reader skips as
a script's demo runs at import, and redefines causal_average as a pure-Python loop over x.tolist() (one op at any T,
so the op count stays flat; tensors on other devices still get the vectorised version)."""

import torch

__name__ = "__main__"


def causal_average(x):
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    weights = weights / weights.sum(dim=1, keepdim=True)
    return weights @ x


def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len):
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)


if __name__ == "__main__":
    _vectorised = causal_average

    def causal_average(x):
        if x.device.type != "cpu":
            return _vectorised(x)
        out = []
        for row in x.tolist():
            total = [0.0] * len(row[0])
            means = []
            for t, values in enumerate(row):
                total = [a + b for a, b in zip(total, values)]
                means.append([a / (t + 1) for a in total])
            out.append(means)
        return torch.tensor(out, dtype=x.dtype, device=x.device)
