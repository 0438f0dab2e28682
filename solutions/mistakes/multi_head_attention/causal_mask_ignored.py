"""Registers the causal mask buffer but never adds it to the scores."""

DIAGNOSIS = "the causal mask buffer is never used: add self.mask[:, :, :T_q, :T_k] to the scores before the softmax."

import math

import torch
from torch import nn

from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args, is_causal=False):
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.is_causal = is_causal
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q, k, v, mask=None):
        B, T_q, dim = q.shape
        T_k = k.size(1)
        xq = self.wq(q).view(B, T_q, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(k).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(v).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)
        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        p_attn = self.attn_dropout(scores.softmax(dim=-1))
        out = (p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)
        return self.resid_dropout(self.wo(out))
