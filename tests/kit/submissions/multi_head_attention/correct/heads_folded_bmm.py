"""Multi-head attention in d2l's style: transpose_qkv folds the heads into the batch dim, torch.bmm computes the
(B*h, T_q, T_k) scores, q is scaled before the product, the masks are combined as one bool keep mask, and
nn.Dropout drops the folded weights."""

import math

import torch
from torch import nn

from .masking import causal_mask


def transpose_qkv(X, num_heads):
    """(B, T, h*d) -> (B*h, T, d)."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """(B*h, T, d) -> (B, T, h*d), undoing transpose_qkv."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, args, is_causal=False):
        super().__init__()
        if args.dim % args.n_heads:
            raise ValueError("dim must be a multiple of n_heads")
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
        B, T_q, T_k = q.shape[0], q.shape[1], k.shape[1]
        queries = transpose_qkv(self.wq(q), self.n_heads) / math.sqrt(self.head_dim)  # (B*h, T_q, d)
        keys = transpose_qkv(self.wk(k), self.n_heads)  # (B*h, T_k, d)
        values = transpose_qkv(self.wv(v), self.n_heads)  # (B*h, T_k, d)
        scores = torch.bmm(queries, keys.transpose(1, 2))  # (B*h, T_q, T_k)
        keep = torch.ones(1, 1, T_q, T_k, dtype=torch.bool, device=q.device)
        if self.is_causal:
            keep = keep & (self.mask[:, :, :T_q, :T_k] == 0)
        if mask is not None:
            keep = keep & mask.bool()
        keep = keep.expand(B, self.n_heads, T_q, T_k).reshape(B * self.n_heads, T_q, T_k)
        scores = scores.masked_fill(~keep, -1e6)
        weights = self.attn_dropout(torch.softmax(scores, dim=-1))  # (B*h, T_q, T_k)
        output = transpose_output(torch.bmm(weights, values), self.n_heads)  # (B, T_q, dim)
        return self.resid_dropout(self.wo(output))
