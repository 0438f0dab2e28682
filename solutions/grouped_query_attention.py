"""Grouped-query attention: n_heads query heads share n_kv_heads key/value heads, a group of query heads each."""

import math

import torch
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention: x (B, T, dim) -> (B, T, dim).

    Attributes: `wq` (nn.Linear(dim, dim)), `wk`, `wv` (nn.Linear(dim, n_kv_heads * head_dim)), `wo`
    (nn.Linear(dim, dim)), all without bias; `attn_dropout`, `resid_dropout`.
    """

    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        if args.n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads {args.n_heads} is not divisible by n_kv_heads {n_kv_heads}")
        self.n_heads = args.n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.n_rep = args.n_heads // n_kv_heads  # query heads per key/value head: the group's size
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        # The saving: keys and values have n_kv_heads heads, not n_heads.
        self.wk = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, dim = x.shape
        xq = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        xk = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        xv = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        # Query head h reads key/value head h // n_rep: each kv head is repeated n_rep times in a row
        # (kv0, kv0, kv1, kv1, ...), as llama's repeat_kv does. .repeat would tile them (kv0, kv1, kv0, kv1).
        xk = xk.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T, hd)
        xv = xv.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T, hd)
        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # keep j <= i
        scores = scores.masked_fill(~causal, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))  # the extra keep mask (e.g. padding)
        p_attn = self.attn_dropout(scores.softmax(dim=-1))  # (B, nh, T, T)
        out = (p_attn @ xv).transpose(1, 2).contiguous().view(B, T, dim)  # (B, T, nh * hd)
        return self.resid_dropout(self.wo(out))  # (B, T, dim)


def kv_cache_bytes(n_layers: int, batch: int, seq_len: int, n_kv_heads: int, head_dim: int,
                   bytes_per_value: int = 2) -> int:
    """The bytes a KV cache holds: keys and values (2), in every layer, for every position of every sequence."""
    return 2 * n_layers * batch * seq_len * n_kv_heads * head_dim * bytes_per_value
