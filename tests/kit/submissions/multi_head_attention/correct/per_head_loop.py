"""Multi-head attention with a Python loop over the heads, each projecting with its own rows of wq, wk, wv."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args, is_causal=False):
        super().__init__()
        if args.dim % args.n_heads:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        self.n_heads, self.head_dim, self.is_causal = args.n_heads, args.dim // args.n_heads, is_causal
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q, k, v, mask=None):
        T_q, T_k = q.size(1), k.size(1)
        values, scores = [], []
        for h in range(self.n_heads):
            rows = slice(h * self.head_dim, (h + 1) * self.head_dim)
            qh = F.linear(q, self.wq.weight[rows])  # (B, T_q, hd)
            kh = F.linear(k, self.wk.weight[rows])  # (B, T_k, hd)
            values.append(F.linear(v, self.wv.weight[rows]))  # (B, T_k, hd)
            scores.append(qh @ kh.transpose(1, 2) / math.sqrt(self.head_dim))  # (B, T_q, T_k)
        scores = torch.stack(scores, dim=1)  # (B, nh, T_q, T_k)
        if self.is_causal:
            scores = scores + self.mask[:, :, :T_q, :T_k]
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = self.attn_dropout(F.softmax(scores, dim=-1))
        heads = [weights[:, h] @ values[h] for h in range(self.n_heads)]  # n_heads x (B, T_q, hd)
        return self.resid_dropout(self.wo(torch.cat(heads, dim=-1)))
