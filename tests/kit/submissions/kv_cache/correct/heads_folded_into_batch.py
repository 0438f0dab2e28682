"""Heads folded into the batch (B * n_heads, T, head_dim) with torch.bmm; the cache kept in the contract's layout."""

import math

import torch
from torch import nn

from .config import ModelArgs
from .rope import RotaryEmbedding


class CachedSelfAttention(nn.Module):
    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        if args.dim % args.n_heads:
            raise ValueError("dim must be divisible by n_heads")
        self.n_heads, self.head_dim, self.max_seq_len = args.n_heads, args.dim // args.n_heads, args.max_seq_len
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(args.dim, args.dim, bias=False) for _ in range(4))
        self.rope = RotaryEmbedding(self.head_dim, args.max_seq_len)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        H, hd = self.n_heads, self.head_dim
        past = 0 if cache is None else cache[0].shape[2]
        if past + T > self.max_seq_len:
            raise ValueError(f"{past + T} positions > max_seq_len {self.max_seq_len}")
        q, k, v = (w(x).view(B, T, H, hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = self.rope(q, k, torch.arange(past, past + T, device=x.device))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        S = past + T
        qf, kf, vf = q.reshape(B * H, T, hd), k.reshape(B * H, S, hd), v.reshape(B * H, S, hd)
        att = torch.bmm(qf, kf.transpose(1, 2)) * (1.0 / math.sqrt(hd))  # (B*H, T, S)
        rows = torch.arange(T, device=x.device)[:, None] + past
        cols = torch.arange(S, device=x.device)[None, :]
        att = att.masked_fill(cols > rows, float("-inf"))
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = torch.bmm(att, vf).view(B, H, T, hd).transpose(1, 2).reshape(B, T, D)
        return self.resid_dropout(self.wo(y)), (k, v)
