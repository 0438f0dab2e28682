"""Builds the decoder's self-attention with is_causal=False, so each position sees the future."""

DIAGNOSIS = "the decoder's self-attention is not causal, so positions see the future: build it with is_causal=True."


import torch
from torch import nn

from .config import ModelArgs
from .multi_head_attention import MultiHeadAttention
from .sublayers import FeedForward, ResidualConnection


class DecoderLayer(nn.Module):
    """One decoder layer: causal self-attention, cross-attention, feed-forward, each in a pre-norm residual.

    x (B, T_tgt, d_model), memory (B, T_src, d_model) -> (B, T_tgt, d_model).
    Attributes: `self_attn` (causal MultiHeadAttention), `cross_attn` (MultiHeadAttention, not causal),
    `feed_forward` (FeedForward), `residual1`, `residual2`, `residual3` (ResidualConnection).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512) -> None:
        super().__init__()
        args = ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout, max_seq_len=max_seq_len)
        self.self_attn = MultiHeadAttention(args, is_causal=False)
        self.cross_attn = MultiHeadAttention(args, is_causal=False)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual1 = ResidualConnection(d_model, dropout)
        self.residual2 = ResidualConnection(d_model, dropout)
        self.residual3 = ResidualConnection(d_model, dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask))  # (B, T_tgt, d_model), causal
        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))  # (B, T_tgt, d_model)
        return self.residual3(x, self.feed_forward)  # (B, T_tgt, d_model)


class Decoder(nn.Module):
    """A stack of n_layers DecoderLayers and a final LayerNorm: (B, T_tgt, d_model) -> (B, T_tgt, d_model).

    Attributes: `layers` (nn.ModuleList of DecoderLayer), `norm` (nn.LayerNorm(d_model)).
    """

    def __init__(
        self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, max_seq_len) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)  # (B, T_tgt, d_model)
        return self.norm(x)  # (B, T_tgt, d_model)
