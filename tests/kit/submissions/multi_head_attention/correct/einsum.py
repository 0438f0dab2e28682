"""Multi-head attention with torch.einsum for the head split, the scores and the merge, and torch.where masking."""

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
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(args.dim, args.dim, bias=False) for _ in range(4))
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q, k, v, mask=None):
        B, T_q, dim = q.shape
        T_k = k.shape[1]
        xq = self.wq(q).unflatten(-1, (self.n_heads, self.head_dim))  # (B, T_q, nh, hd)
        xk = self.wk(k).unflatten(-1, (self.n_heads, self.head_dim))  # (B, T_k, nh, hd)
        xv = self.wv(v).unflatten(-1, (self.n_heads, self.head_dim))  # (B, T_k, nh, hd)
        scores = torch.einsum("bqhd,bkhd->bhqk", xq, xk) / math.sqrt(self.head_dim)
        if self.is_causal:
            scores = scores + self.mask[..., :T_q, :T_k]
        if mask is not None:
            scores = torch.where(mask.bool(), scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        weights = self.attn_dropout(scores.softmax(-1))
        out = torch.einsum("bhqk,bkhd->bqhd", weights, xv).flatten(-2)  # (B, T_q, dim)
        return self.resid_dropout(self.wo(out))
