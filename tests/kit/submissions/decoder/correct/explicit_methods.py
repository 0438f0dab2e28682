"""No lambdas: one method per sublayer, keyword arguments, layers appended one by one."""

import torch
from torch import nn

from .config import ModelArgs
from .multi_head_attention import MultiHeadAttention
from .sublayers import FeedForward, ResidualConnection


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, max_seq_len=512):
        super().__init__()
        self.self_attn = MultiHeadAttention(
            ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout, max_seq_len=max_seq_len), is_causal=True
        )
        self.cross_attn = MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout))
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual1 = ResidualConnection(d_model, dropout)
        self.residual2 = ResidualConnection(d_model, dropout)
        self.residual3 = ResidualConnection(d_model, dropout)
        self._memory = self._src_mask = self._tgt_mask = None

    def _masked_self_attention(self, y):
        return self.self_attn(y, y, y, mask=self._tgt_mask)

    def _cross_attention(self, y):
        return self.cross_attn(q=y, k=self._memory, v=self._memory, mask=self._src_mask)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        self._memory, self._src_mask, self._tgt_mask = memory, src_mask, tgt_mask
        try:
            x = self.residual1(x, self._masked_self_attention)
            x = self.residual2(x, self._cross_attention)
            return self.residual3(x, self.feed_forward)
        finally:
            self._memory = self._src_mask = self._tgt_mask = None  # no tensors kept between calls


class Decoder(nn.Module):
    def __init__(self, n_layers, d_model, n_heads, d_ff, dropout=0.0, max_seq_len=512):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout=dropout, max_seq_len=max_seq_len))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, src_mask=None, tgt_mask=None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask=src_mask, tgt_mask=tgt_mask)
        return self.norm(x)
