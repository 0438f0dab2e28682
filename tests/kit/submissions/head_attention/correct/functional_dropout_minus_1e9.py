"""F.dropout on the weights with the module's own flag; -1e9 for the blocked scores."""

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

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, -1e9)
        wei = F.softmax(wei, dim=-1)
        wei = F.dropout(wei, p=self.dropout.p, training=self.training)
        return wei @ v
