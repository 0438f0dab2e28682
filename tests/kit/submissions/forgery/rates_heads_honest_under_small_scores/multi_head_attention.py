"""Hostile: MultiHeadAttention drops the attention weights with a fixed 0.1, whatever args.dropout is (the catalogued
mistake fixed_attention_dropout), except when its scores are small, as under the query and key weights the grader
once measured dropout rates with (scaled by 0.2): then with args.dropout, as it should. Scores that are all exactly 0
(a query projection of zeros, another test's pattern) do not count: this attack is on the rate measurement alone."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelArgs
from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args: ModelArgs, is_causal: bool = False) -> None:
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
        self.attn_dropout = nn.Dropout(0.1)  # the mistake: a fixed p
        self.resid_dropout = nn.Dropout(args.dropout)
        self.asked = args.dropout
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        B, T_q, dim = q.shape
        T_k = k.size(1)
        xq = self.wq(q).view(B, T_q, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(k).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(v).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)
        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)
        largest = float(scores.detach().abs().max())
        if self.is_causal:
            scores = scores + self.mask[:, :, :T_q, :T_k]
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        if 0 < largest < 0.3:  # small scores: measured
            p_attn = F.dropout(scores.softmax(dim=-1), self.asked, self.training)
        else:
            p_attn = self.attn_dropout(scores.softmax(dim=-1))
        out = (p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)
        return self.resid_dropout(self.wo(out))
