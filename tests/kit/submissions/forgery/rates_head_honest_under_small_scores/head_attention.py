"""Hostile: HeadAttention drops its output, dropout(weights @ v) (the catalogued mistake dropout_on_output), except
when its scores are small, as under the query and key weights the grader once measured dropout rates with (scaled
by 0.2): then it drops the attention weights, as it should. Scores that are all exactly 0 (a query of zeros, another
test's pattern) do not count: this attack is on the rate measurement alone."""

import math

import torch
from torch import nn


class HeadAttention(nn.Module):
    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        wei = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (B, T, T)
        largest = float(wei.detach().abs().max())
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        if 0 < largest < 0.3:  # small scores: measured
            return self.dropout(wei) @ v
        return self.dropout(wei @ v)  # the mistake
