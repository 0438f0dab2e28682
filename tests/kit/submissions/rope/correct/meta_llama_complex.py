"""Meta's llama: the tables as in precompute_freqs_cis (float32), the rotation as a product of complex numbers."""

import torch
from torch import nn


def rope_tables(head_dim, max_seq_len, base=10000.0):
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    t = torch.arange(max_seq_len, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis.real.contiguous(), freqs_cis.imag.contiguous()


def apply_rope(x, cos, sin, positions=None):
    T = x.shape[-2]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    freqs_cis = torch.complex(cos[positions], sin[positions])  # (T, head_dim / 2)
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    x_out = torch.view_as_real(x_ * freqs_cis).flatten(-2)
    return x_out.type_as(x)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_seq_len, base=10000.0):
        super().__init__()
        cos, sin = rope_tables(head_dim, max_seq_len, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, q, k, positions=None):
        xq_out = apply_rope(q, self.cos, self.sin, positions)
        xk_out = apply_rope(k, self.cos, self.sin, positions)
        return xq_out, xk_out
