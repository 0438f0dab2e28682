"""GPT-J's interleaved style: the tables repeated to full width, then x * cos + rotate_every_two(x) * sin."""

import torch
from torch import nn


def rope_tables(head_dim, max_seq_len, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    sinusoid = torch.einsum("i,j->ij", torch.arange(max_seq_len).float(), inv_freq)
    return torch.cos(sinusoid), torch.sin(sinusoid)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, cos, sin, positions=None):
    T = x.shape[-2]
    idx = torch.arange(T, device=x.device) if positions is None else positions
    cos = cos[idx].repeat_interleave(2, dim=-1).to(x.dtype)  # (T, head_dim): each angle for both features of a pair
    sin = sin[idx].repeat_interleave(2, dim=-1).to(x.dtype)
    return x * cos + rotate_every_two(x) * sin


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_seq_len, base=10000.0):
        super().__init__()
        cos, sin = rope_tables(head_dim, max_seq_len, base)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, q, k, positions=None):
        return apply_rope(q, self.cos, self.sin, positions), apply_rope(k, self.cos, self.sin, positions)
