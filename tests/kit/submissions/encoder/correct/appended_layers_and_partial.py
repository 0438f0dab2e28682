"""Layers appended one by one, functools.partial for the attention, keyword arguments, from exercises.* imports."""

import functools

import torch
from torch import nn

from exercises.config import ModelArgs
from exercises.multi_head_attention import MultiHeadAttention
from exercises.sublayers import FeedForward, ResidualConnection


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        args = ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout)
        self.self_attn = MultiHeadAttention(args, is_causal=False)
        self.feed_forward = FeedForward(d_model=d_model, d_ff=d_ff, dropout=dropout)
        self.residual1 = ResidualConnection(d_model, dropout=dropout)
        self.residual2 = ResidualConnection(d_model, dropout=dropout)

    def _self_attention(self, y: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.self_attn(q=y, k=y, v=y, mask=mask)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.residual1(x, functools.partial(self._self_attention, mask=mask))
        return self.residual2(x, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(EncoderLayer(d_model, n_heads, d_ff, dropout))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for i in range(len(self.layers)):
            x = self.layers[i](x, mask)
        out = self.norm(x)
        return out
