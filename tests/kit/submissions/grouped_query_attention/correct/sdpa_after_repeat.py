"""Grouped-query attention nanoGPT-style: the key/value heads repeated with repeat_interleave, then
F.scaled_dot_product_attention with is_causal=True, or a float additive mask when an extra keep mask is given."""

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError("dim % n_heads != 0")
        if args.n_heads % n_kv_heads != 0:
            raise ValueError("n_heads % n_kv_heads != 0")
        self.n_head, self.n_kv_head = args.n_heads, n_kv_heads
        self.n_embd = args.dim
        hs = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, n_kv_heads * hs, bias=False)
        self.wv = nn.Linear(args.dim, n_kv_heads * hs, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout

    def forward(self, x, mask=None):
        B, T, C = x.size()
        hs = C // self.n_head
        q = self.wq(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.wk(x).view(B, T, self.n_kv_head, hs).transpose(1, 2)  # (B, n_kv, T, hs)
        v = self.wv(x).view(B, T, self.n_kv_head, hs).transpose(1, 2)
        rep = self.n_head // self.n_kv_head
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # (B, nh, T, hs)
        dropout_p = self.dropout if self.training else 0
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=dropout_p, is_causal=True)
        else:
            bias = torch.zeros(T, T, dtype=x.dtype, device=x.device).masked_fill(
                torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            bias = bias.masked_fill(mask == 0, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.wo(y))


def kv_cache_bytes(n_layers, batch, seq_len, n_kv_heads, head_dim, bytes_per_value=2):
    return int(2 * n_layers * batch * seq_len * n_kv_heads * head_dim * bytes_per_value)
