"""Masks built on the CPU, then moved with .to(x.device): correct on a GPU too."""

import torch


def causal_average(x: torch.Tensor) -> torch.Tensor:
    """out[:, t] = mean of x[:, :t+1]: each position averages itself and everything before it.

    Args:
        x: (B, T, C).

    Returns:
        (B, T, C), computed with one matrix product (no Python loop over T).
    """
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))  # (T, T)
    weights = weights / weights.sum(dim=1, keepdim=True)  # row t spreads 1/(t+1) over 0..t
    return weights @ x  # (T, T) @ (B, T, C) -> (B, T, C)


def weight_mask_and_normalization(weight: torch.Tensor) -> torch.Tensor:
    """Block the entries above the diagonal, then softmax each row over the columns it may see.

    Args:
        weight: (..., T, T) scores.

    Returns:
        (..., T, T); row i spreads over columns 0..i and sums to 1.
    """
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool).tril().to(weight.device)  # (T, T)
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def create_look_ahead_mask(seq_len: int) -> torch.Tensor:
    """Keep mask (1, 1, seq_len, seq_len): 1 where column <= row (the past and the present)."""
    return torch.ones(seq_len, seq_len).tril().view(1, 1, seq_len, seq_len)


def causal_mask(seq_len: int) -> torch.Tensor:
    """Additive mask (1, 1, seq_len, seq_len): 0 on and below the diagonal, -inf above it."""
    mask = torch.full((1, 1, seq_len, seq_len), float("-inf"))
    return torch.triu(mask, diagonal=1)
