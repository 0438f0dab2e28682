"""One causal head that reuses attention() from attention.py, passing tril[:T, :T] as the keep mask."""

from torch import nn
import torch

from .attention import attention


class HeadAttention(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        T = x.shape[1]
        output, _ = attention(self.query(x), self.key(x), self.value(x), dropout=self.dropout, mask=self.tril[:T, :T])
        return output
