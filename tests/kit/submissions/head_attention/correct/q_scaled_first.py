"""One causal head that scales q by head_size**-0.5 before the product and blocks the future with a bool mask
and -1e4 (exp(-1e4) is exactly 0 in float32)."""

import torch
import torch.nn.functional as F
from torch import nn


class HeadAttention(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
        self.scale = head_size**-0.5

    def forward(self, x):
        T = x.shape[1]
        q = self.query(x) * self.scale  # (B, T, hs), scaled before the product
        k = self.key(x)  # (B, T, hs)
        wei = q @ k.transpose(1, 2)  # (B, T, T)
        future = ~self.tril[:T, :T].bool()
        wei = F.softmax(wei.masked_fill(future, -1e4), dim=-1)
        return self.dropout(wei) @ self.value(x)  # (B, T, hs)
