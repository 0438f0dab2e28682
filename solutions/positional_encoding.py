"""Sinusoidal positional encoding, stored as a buffer and added to the embeddings."""

import math

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """dropout(x + pe[:, :T]) with pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(same).

    Args:
        d_model: embedding width (even).
        max_len: number of positions in the table.
        dropout: probability of the dropout applied to the sum.

    Attributes:
        pe: buffer (1, max_len, d_model), float32.
        dropout: nn.Dropout(dropout).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                             * (-math.log(10000.0) / d_model))  # (d_model/2,), 1 / 10000^(2i/d)
        pe = torch.zeros(max_len, d_model)  # (max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)  # even columns
        pe[:, 1::2] = torch.cos(position * div_term)  # odd columns
        self.register_buffer("pe", pe.unsqueeze(0))  # (1, max_len, d_model): not trained, saved, moved by .to()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model)."""
        T = x.size(1)
        return self.dropout(x + self.pe[:, :T])  # (B, T, d_model) + (1, T, d_model)
