"""The annotated Transformer's clones(): n deep copies of one prototype layer, and named inner functions."""

import copy

from torch import nn

from .config import ModelArgs
from .multi_head_attention import MultiHeadAttention
from .sublayers import FeedForward, ResidualConnection


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout))
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual1 = ResidualConnection(d_model, dropout)
        self.residual2 = ResidualConnection(d_model, dropout)

    def forward(self, x, mask=None):
        def attend(y):
            return self.self_attn(y, y, y, mask=mask)

        x = self.residual1(x, attend)
        x = self.residual2(x, lambda y: self.feed_forward(y))
        return x


class Encoder(nn.Module):
    def __init__(self, n_layers, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.layers = clones(EncoderLayer(d_model, n_heads, d_ff, dropout), n_layers)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask=mask)
        return self.norm(x)
