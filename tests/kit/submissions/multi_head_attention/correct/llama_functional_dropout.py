"""llama-style: F.dropout(x, self.p, self.training) for both dropouts, no nn.Dropout called."""

import math

import torch.nn.functional as F
from torch import nn

from .config import ModelArgs
from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args: ModelArgs, is_causal: bool = False):
        super().__init__()
        assert args.dim % args.n_heads == 0
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.is_causal = is_causal
        self.dropout = args.dropout
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
        T_k = k.size(1)
        xq, xk, xv = self.split(self.wq(q)), self.split(self.wk(k)), self.split(self.wv(v))
        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)
        if self.is_causal:
            scores = scores + self.mask[:, :, :T_q, :T_k]
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        p = scores.softmax(dim=-1)
        p = F.dropout(p, p=self.dropout, training=self.training)
        out = p @ xv
        out = out.transpose(1, 2).contiguous().view(B, T_q, dim)
        return F.dropout(self.wo(out), self.dropout, self.training)
