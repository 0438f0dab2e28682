"""Explicit even/odd slicing: an empty output filled in place, feature pairs written back with strided slices."""

import torch
from torch import nn


def rope_tables(head_dim, max_seq_len, base=10000.0):
    theta = torch.pow(torch.tensor(base), -torch.arange(0, head_dim, 2).float() / head_dim)
    pos = torch.arange(max_seq_len).float().unsqueeze(1)
    angle = pos * theta
    return torch.cos(angle), torch.sin(angle)


def apply_rope(x, cos, sin, positions=None):
    T = x.size(-2)
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    else:
        cos, sin = cos[:T], sin[:T]
    cos, sin = cos.type_as(x), sin.type_as(x)
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_seq_len, base=10000.0):
        super().__init__()
        cos, sin = rope_tables(head_dim, max_seq_len, base)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, q, k, positions=None):
        return apply_rope(q, self.cos, self.sin, positions), apply_rope(k, self.cos, self.sin, positions)
