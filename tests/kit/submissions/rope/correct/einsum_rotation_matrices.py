"""A 2x2 rotation matrix per pair and position, applied with einsum; the angles computed in float64, then cast."""

import math

import torch
from torch import nn


def rope_tables(head_dim, max_seq_len, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = torch.exp(-2 * i / head_dim * math.log(base))
    angles = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * freqs[None, :]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin, positions=None):
    *lead, T, d = x.shape
    if positions is None:
        positions = torch.arange(T, device=x.device)
    c, s = cos[positions].to(x.dtype), sin[positions].to(x.dtype)
    rot = torch.stack((torch.stack((c, -s), dim=-1), torch.stack((s, c), dim=-1)), dim=-2)  # (T, d/2, 2, 2)
    pairs = x.reshape(*lead, T, d // 2, 2)
    return torch.einsum("tpij,...tpj->...tpi", rot, pairs).reshape(x.shape)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_seq_len, base=10000.0):
        super().__init__()
        cos, sin = rope_tables(head_dim, max_seq_len, base)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, q, k, positions=None):
        q = apply_rope(q, self.cos, self.sin, positions)
        k = apply_rope(k, self.cos, self.sin, positions)
        return q, k
