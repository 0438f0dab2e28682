"""Multi-head attention that reuses attention() from attention.py, with the causal and extra masks as one keep mask."""

import torch
from torch import nn

from .attention import attention
from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args, is_causal=False):
        super().__init__()
        assert args.dim % args.n_heads == 0, "dim must be divisible by n_heads"
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

    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, q, k, v, mask=None):
        B, T_q, dim = q.shape
        T_k = k.shape[1]
        keep = None
        if self.is_causal:
            keep = self.mask[:, :, :T_q, :T_k] == 0
        if mask is not None:
            keep = (mask != 0) if keep is None else keep & (mask != 0)
        out, _ = attention(self.split(self.wq(q)), self.split(self.wk(k)), self.split(self.wv(v)),
                           dropout=self.attn_dropout, mask=keep)
        out = out.transpose(1, 2).reshape(B, T_q, dim)
        return self.resid_dropout(self.wo(out))
