"""einsum for the scores and the values, -1e9 for blocked scores, and apply_rope called directly with rope's tables."""

import math

import torch
from torch import nn

from .config import ModelArgs
from .rope import RotaryEmbedding, apply_rope


class CachedSelfAttention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.max_seq_len = args.max_seq_len
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, args.max_seq_len)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        t0 = cache[0].size(2) if cache is not None else 0
        if t0 + T > self.max_seq_len:
            raise ValueError("past max_seq_len")
        pos = torch.arange(t0, t0 + T, device=x.device)
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, self.rope.cos, self.rope.sin, pos)
        k = apply_rope(k, self.rope.cos, self.rope.sin, pos)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        mask = torch.tril(torch.ones(T, t0 + T, device=x.device), diagonal=t0)
        scores = scores.masked_fill(mask == 0, -1e9)
        weights = self.attn_dropout(torch.softmax(scores.float(), dim=-1).type_as(q))
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v).transpose(1, 2).reshape(B, T, -1)
        return self.resid_dropout(self.wo(out)), (k, v)
