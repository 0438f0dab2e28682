"""Fills the table one position at a time with Python's math module, then stores it in float32."""

import math

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        rows = []
        for pos in range(max_len):
            row = []
            for i in range(0, d_model, 2):
                angle = pos / (10000 ** (i / d_model))
                row += [math.sin(angle), math.cos(angle)]
            rows.append(row)
        self.register_buffer("pe", torch.tensor(rows, dtype=torch.float32).unsqueeze(0))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        seq_len = x.size(1)
        return self.dropout(x + self.pe[:, :seq_len])
