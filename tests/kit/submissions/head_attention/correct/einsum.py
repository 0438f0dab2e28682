"""One causal head written with torch.einsum, a boolean tril buffer and torch.where for the mask."""

import math

import torch
from torch import nn


class HeadAttention(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.ones(block_size, block_size, dtype=torch.bool).tril())
        self.dropout = nn.Dropout(dropout)
        self.head_size = head_size

    def forward(self, x):
        T = x.size(1)
        q, k, v = self.query(x), self.key(x), self.value(x)
        scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(self.head_size)
        scores = torch.where(self.tril[:T, :T], scores, torch.full_like(scores, float("-inf")))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return torch.einsum("bts,bsd->btd", weights, v)
