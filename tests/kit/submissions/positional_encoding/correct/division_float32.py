"""Angles as position / 10000 ** (2i / d) by float32 division, and the buffer marked persistent=True explicitly."""

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        position = torch.arange(max_len).float().unsqueeze(1)  # (max_len, 1)
        denominator = 10000 ** (torch.arange(0, d_model, 2).float() / d_model)  # (d_model/2,)
        pe = torch.empty(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position / denominator)
        pe[0, :, 1::2] = torch.cos(position / denominator)
        self.register_buffer("pe", pe, persistent=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, _ = x.shape
        return self.dropout(x + self.pe[:, :T].expand(B, T, -1))
