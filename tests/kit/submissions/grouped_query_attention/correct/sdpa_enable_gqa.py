"""Grouped-query attention through F.scaled_dot_product_attention(..., enable_gqa=True): the fused kernel repeats the
key/value heads itself; the causal and the extra keep mask are combined into one boolean attn_mask, and dropout is
dropout_p, in training mode only."""

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        if args.dim % args.n_heads or args.n_heads % n_kv_heads:
            raise ValueError(f"cannot split dim {args.dim} into {args.n_heads} heads over {n_kv_heads} kv heads")
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, n_kv_heads, args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        p = self.attn_dropout.p if self.training else 0.0
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, enable_gqa=True)
        else:
            keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril() & (mask != 0)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p, enable_gqa=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.wo(y))


def kv_cache_bytes(n_layers, batch, seq_len, n_kv_heads, head_dim, bytes_per_value=2):
    return 2 * n_layers * batch * seq_len * n_kv_heads * head_dim * bytes_per_value
