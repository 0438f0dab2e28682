"""The three input projections in an nn.ModuleDict registered first, wq, wk and wv aliases into it: the
parameters are proj.q.weight and wq.weight at once."""

import math

import torch
from torch import nn

from .config import ModelArgs
from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    """Multi-head (self- or cross-) attention: q (B, T_q, dim), k and v (B, T_k, dim) -> (B, T_q, dim).

    Attributes: `n_heads`, `head_dim`; `wq`, `wk`, `wv`, `wo` (nn.Linear(dim, dim, bias=False));
    `attn_dropout`, `resid_dropout`; when `is_causal`, buffer `mask` = causal_mask(max_seq_len).
    """

    def __init__(self, args: ModelArgs, is_causal: bool = False) -> None:
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.is_causal = is_causal
        # One (dim x dim) projection is the n_heads (head_dim x dim) projections stacked: head h owns rows
        # [h * head_dim, (h + 1) * head_dim) of wq, wk, wv and the same columns of wo.
        self.proj = nn.ModuleDict({n: nn.Linear(args.dim, args.dim, bias=False) for n in "qkv"})
        self.wq, self.wk, self.wv = self.proj["q"], self.proj["k"], self.proj["v"]
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))  # (1, 1, max_seq_len, max_seq_len)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        B, T_q, dim = q.shape
        T_k = k.size(1)
        xq = self.wq(q).view(B, T_q, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T_q, hd)
        xk = self.wk(k).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T_k, hd)
        xv = self.wv(v).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T_k, hd)
        scores = xq @ xk.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh, T_q, T_k)
        if self.is_causal:
            scores = scores + self.mask[:, :, :T_q, :T_k]  # 0 on and below the diagonal, -inf above
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))  # the extra keep mask (e.g. padding)
        p_attn = self.attn_dropout(scores.softmax(dim=-1))  # (B, nh, T_q, T_k)
        out = (p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)  # (B, T_q, nh * hd): heads side by side
        return self.resid_dropout(self.wo(out))  # (B, T_q, dim)
