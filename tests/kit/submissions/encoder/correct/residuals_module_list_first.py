"""The two residual connections in an nn.ModuleList registered first, residual1 and residual2 aliases into it,
and forward calls them through the list."""

import torch
from torch import nn

from .config import ModelArgs
from .multi_head_attention import MultiHeadAttention
from .sublayers import FeedForward, ResidualConnection


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention then feed-forward, each in a pre-norm residual, (B, T, d_model) -> same.

    Attributes: `self_attn` (MultiHeadAttention, not causal), `feed_forward` (FeedForward),
    `residual1`, `residual2` (ResidualConnection).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout), is_causal=False)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residuals = nn.ModuleList([ResidualConnection(d_model, dropout) for _ in range(2)])
        self.residual1 = self.residuals[0]
        self.residual2 = self.residuals[1]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.residuals[0](x, lambda y: self.self_attn(y, y, y, mask))
        return self.residuals[1](x, self.feed_forward)


class Encoder(nn.Module):
    """A stack of n_layers EncoderLayers and a final LayerNorm: (B, T, d_model) -> (B, T, d_model).

    Attributes: `layers` (nn.ModuleList of EncoderLayer), `norm` (nn.LayerNorm(d_model)).
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d_model)
        return self.norm(x)  # (B, T, d_model): pre-norm layers leave the stack's output un-normalised
