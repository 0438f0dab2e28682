"""Sliding-window attention: a causal mask that keeps only the last `window` positions, and the cache it needs."""

import math

import torch


def sliding_window_mask(seq_len: int, window: int) -> torch.Tensor:
    """Keep mask (seq_len, seq_len): query i sees key j when j <= i and i - j < window (the last `window` positions,
    itself included)."""
    i = torch.arange(seq_len)[:, None]  # (T, 1): the query's position
    j = torch.arange(seq_len)[None, :]  # (1, T): the key's position
    return (j <= i) & (i - j < window)  # (T, T), bool


def combine_masks(keep: torch.Tensor, key_padding: torch.Tensor) -> torch.Tensor:
    """keep (T_q, T_k) and key_padding (B, T_k) (True = a real token) -> (B, 1, T_q, T_k): kept where both keep."""
    keep = keep.to(key_padding.device).bool()[None, None]  # (1, 1, T_q, T_k)
    return keep & key_padding.bool()[:, None, None, :]  # padding runs along the keys: (B, 1, 1, T_k)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v under a keep mask; a query with no key left gets zeros, never NaN."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    allowed = keep != 0
    scores = scores.masked_fill(~allowed, float("-inf"))
    # A row of -inf only would softmax to 0/0 = NaN (and -1e9 everywhere to uniform weights): give such rows finite
    # scores, then zero their weights, so that their output and their gradients are 0.
    empty = ~allowed.any(dim=-1, keepdim=True)  # (..., T_q, 1)
    scores = scores.masked_fill(empty, 0.0)
    p_attn = scores.softmax(dim=-1).masked_fill(empty, 0.0)  # (..., T_q, T_k)
    return p_attn @ v  # (..., T_q, d_v)


class RollingKVCache:
    """The keys and values of the last `window` positions: older ones can never be attended to again."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.k: torch.Tensor | None = None  # (B, H, <= window, d)
        self.v: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, H, T_new, d) keys and values; return the last min(window, seen) of each along dim 2."""
        if self.k is None or self.v is None:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        self.k, self.v = self.k[:, :, -self.window:], self.v[:, :, -self.window:]  # drop the oldest
        return self.k, self.v
