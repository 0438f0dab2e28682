"""Multi-head attention built on an inner scaled dot-product attention module that owns the weight dropout
(d2l's DotProductAttention), exposed under the contract's name as the same object; the keep mask as uint8."""

import math

import torch
from torch import nn

from .masking import causal_mask


class DotProductAttention(nn.Module):
    """softmax(q k^T / sqrt(d) + bias) v, with dropout on the weights."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, bias=None, keep=None):
        d = queries.shape[-1]
        scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d)
        if bias is not None:
            scores = scores + bias
        if keep is not None:
            scores = scores.masked_fill(keep == 0, -1e9)
        self.attention_weights = torch.softmax(scores, dim=-1)
        return torch.matmul(self.dropout(self.attention_weights), values)


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
        self.attention = DotProductAttention(args.dropout)
        self.attn_dropout = self.attention.dropout
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q, k, v, mask=None):
        B = q.size(0)
        xq, xk, xv = (
            proj(x).view(B, -1, self.n_heads, self.head_dim).transpose(1, 2)
            for proj, x in ((self.wq, q), (self.wk, k), (self.wv, v))
        )
        bias = self.mask[:, :, : q.size(1), : k.size(1)] if self.is_causal else None
        keep = mask.to(torch.uint8) if mask is not None else None
        out = self.attention(xq, xk, xv, bias, keep)  # (B, h, T_q, d)
        out = out.transpose(1, 2).contiguous().view(B, -1, self.n_heads * self.head_dim)
        return self.resid_dropout(self.wo(out))
