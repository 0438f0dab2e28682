"""Rotary position embedding (RoPE): each pair of features of a query or key turned by an angle its position sets."""

import torch
from torch import nn


def rope_tables(head_dim: int, max_seq_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of angle[p, i] = p * base^(-2i / head_dim), each (max_seq_len, head_dim // 2), float32."""
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (head_dim/2,): 1, ..., ~1/base
    positions = torch.arange(max_seq_len, dtype=torch.float32)  # (max_seq_len,)
    angles = torch.outer(positions, freqs)  # (max_seq_len, head_dim/2): pair i turns by freqs[i] per position
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., T, head_dim) with features 2i, 2i+1 (pair i) rotated by the angle of each token's position."""
    T = x.size(-2)
    if positions is None:
        cos, sin = cos[:T], sin[:T]  # (T, head_dim/2): positions 0..T-1
    else:
        cos, sin = cos[positions], sin[positions]  # (T, head_dim/2): the rows of the given positions
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # float32 tables; the output keeps x's dtype
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, head_dim/2) each: the two halves of every pair
    out_even = x_even * cos - x_odd * sin  # a 2-D rotation of (x_even, x_odd) by the angle
    out_odd = x_even * sin + x_odd * cos
    return torch.stack((out_even, out_odd), dim=-1).flatten(-2)  # (..., T, head_dim): pairs interleaved again


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys by their positions; buffers `cos`, `sin` (max_seq_len, head_dim // 2), float32."""

    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0) -> None:
        super().__init__()
        cos, sin = rope_tables(head_dim, max_seq_len, base)
        self.register_buffer("cos", cos)  # a buffer: moved by .to(device), saved, never trained
        self.register_buffer("sin", sin)

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """q (..., T, head_dim) and k (..., T, head_dim), rotated alike: q . k then depends on their distance only."""
        return apply_rope(q, self.cos, self.sin, positions), apply_rope(k, self.cos, self.sin, positions)
