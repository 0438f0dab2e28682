"""Grouped-query attention without repeating anything: the queries reshaped into (B, n_kv, group, T, d), one
group per key/value head, and einsum against the (B, n_kv, T, d) keys and values."""

import math

import torch
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        if args.n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads {args.n_heads} is not divisible by n_kv_heads {n_kv_heads}")
        self.n_heads, self.n_kv_heads = args.n_heads, n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x, mask=None):
        B, T, dim = x.shape
        g, hd = self.n_heads // self.n_kv_heads, self.head_dim
        # query head h = kv * g + i: group kv, member i
        q = self.wq(x).view(B, T, self.n_kv_heads, g, hd).permute(0, 2, 3, 1, 4)  # (B, n_kv, g, T, hd)
        k = self.wk(x).view(B, T, self.n_kv_heads, hd).transpose(1, 2)  # (B, n_kv, T, hd)
        v = self.wv(x).view(B, T, self.n_kv_heads, hd).transpose(1, 2)
        scores = torch.einsum("bngqd,bnkd->bngqk", q, k) / math.sqrt(hd)  # (B, n_kv, g, T, T)
        blocked = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(blocked, float("-inf"))
        if mask is not None:
            keep = torch.as_tensor(mask, device=x.device).expand(B, self.n_heads, T, T)
            scores = scores.masked_fill(keep.reshape(B, self.n_kv_heads, g, T, T) == 0, float("-inf"))
        weights = self.attn_dropout(scores.softmax(dim=-1))
        out = torch.einsum("bngqk,bnkd->bqngd", weights, v).reshape(B, T, dim)
        return self.resid_dropout(self.wo(out))


def kv_cache_bytes(n_layers, batch, seq_len, n_kv_heads, head_dim, bytes_per_value=2):
    keys = values = batch * n_kv_heads * seq_len * head_dim
    return n_layers * (keys + values) * bytes_per_value
