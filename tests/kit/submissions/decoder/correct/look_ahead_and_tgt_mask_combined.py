"""Combines create_look_ahead_mask with tgt_mask itself (redundant beside the causal self_attn); deep-copied layers."""

import copy

from torch import nn

from .config import ModelArgs
from .masking import create_look_ahead_mask
from .multi_head_attention import MultiHeadAttention
from .sublayers import FeedForward, ResidualConnection


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, max_seq_len=512):
        super().__init__()
        args = ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout, max_seq_len=max_seq_len)
        self.self_attn = MultiHeadAttention(args, is_causal=True)
        self.cross_attn = MultiHeadAttention(args)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual1 = ResidualConnection(d_model, dropout)
        self.residual2 = ResidualConnection(d_model, dropout)
        self.residual3 = ResidualConnection(d_model, dropout)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        T = x.size(1)
        keep = create_look_ahead_mask(T).to(x.device) != 0  # (1, 1, T, T)
        if tgt_mask is not None:
            keep = keep & (tgt_mask != 0)  # (B, 1, T, T)
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, keep))
        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))
        return self.residual3(x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, n_layers, d_model, n_heads, d_ff, dropout=0.0, max_seq_len=512):
        super().__init__()
        layer = DecoderLayer(d_model, n_heads, d_ff, dropout, max_seq_len)
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)
