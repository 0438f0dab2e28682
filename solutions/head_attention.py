"""One causal self-attention head (nanoGPT's `Head`): each token mixes the values of itself and its past."""

import math

import torch
from torch import nn


class HeadAttention(nn.Module):
    """One head of causal self-attention: (B, T, n_embd) -> (B, T, head_size).

    Attributes: `key`, `query`, `value` (nn.Linear(n_embd, head_size, bias=False)), buffer `tril`
    (block_size, block_size) of lower-triangular ones, `dropout` (on the attention weights).
    """

    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))  # a buffer: moved, never trained
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (B, T, T), scaled by head_size, not C
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T), the future is blocked
        wei = wei.softmax(dim=-1)  # (B, T, T), each row sums to 1
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, hs)
        return wei @ v  # (B, T, hs)
