"""Angles from torch.outer(position, 1 / 10000 ** (2i / d)) in float32, interleaved with stack + flatten."""

import torch
import torch.nn.functional as F
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        position = torch.arange(max_len, dtype=torch.float32)
        inv_freq = 1.0 / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        angle = torch.outer(position, inv_freq)  # (max_len, d_model/2)
        pe = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(start_dim=1)  # sin, cos, sin, cos, ...
        self.register_buffer("pe", pe[None])

    def forward(self, x):
        return F.dropout(x + self.pe[:, : x.shape[1], :], p=self.p, training=self.training)
