"""The averaging weights cached behind a bare @lru_cache (imported from functools), with typing's Optional and a
`-> None` among the annotations: plain Python around one matrix product."""

from functools import lru_cache
from typing import Optional

import torch


@lru_cache
def _averaging_weights(T: int, dtype: torch.dtype, device: Optional[torch.device] = None) -> torch.Tensor:
    counts = torch.arange(1, T + 1, dtype=dtype, device=device)  # (T,): row t averages t + 1 positions
    return torch.ones(T, T, dtype=dtype, device=device).tril() / counts.unsqueeze(1)


def _check_3d(x: torch.Tensor) -> None:
    if x.dim() != 3:
        raise ValueError(f"expected x of shape (B, T, C), got {tuple(x.shape)}")


def causal_average(x: torch.Tensor) -> torch.Tensor:
    _check_3d(x)
    return _averaging_weights(x.size(1), x.dtype, x.device) @ x


def weight_mask_and_normalization(weight: torch.Tensor) -> torch.Tensor:
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()  # (T, T)
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len: int) -> torch.Tensor:
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len: int) -> torch.Tensor:
    return torch.triu(torch.full((1, 1, seq_len, seq_len), float("-inf")), diagonal=1)
