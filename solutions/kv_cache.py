"""Causal self-attention with RoPE that decodes with a KV cache: one call on a prompt, then a token per call."""

import math

import torch
from torch import nn

from .config import ModelArgs
from .rope import RotaryEmbedding


class CachedSelfAttention(nn.Module):
    """Causal self-attention over the cached positions and the new ones: x (B, T, dim) -> (B, T, dim), cache.

    Attributes: `n_heads`, `head_dim`; `wq`, `wk`, `wv`, `wo` (nn.Linear(dim, dim, bias=False));
    `rope` = RotaryEmbedding(head_dim, max_seq_len); `attn_dropout`, `resid_dropout`.
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.max_seq_len = args.max_seq_len
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, args.max_seq_len)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        B, T, dim = x.shape
        T_past = 0 if cache is None else cache[0].size(2)
        if T_past + T > self.max_seq_len:
            raise ValueError(f"{T_past} cached and {T} new positions exceed max_seq_len {self.max_seq_len}")
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = self.wk(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        v = self.wv(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        positions = torch.arange(T_past, T_past + T, device=x.device)  # the new tokens come after the cached ones
        q, k = self.rope(q, k, positions)  # rotated once, at their own positions
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)  # (B, nh, T_past + T, hd): keys are cached after RoPE
            v = torch.cat((cache[1], v), dim=2)  # (B, nh, T_past + T, hd)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh, T, T_past + T)
        # New token t sits at position T_past + t: it sees keys 0 .. T_past + t, the diagonal shifted by T_past.
        keep = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
        scores = scores.masked_fill(~keep, float("-inf"))
        p_attn = self.attn_dropout(scores.softmax(dim=-1))  # (B, nh, T, T_past + T)
        out = (p_attn @ v).transpose(1, 2).contiguous().view(B, T, dim)  # (B, T, dim)
        return self.resid_dropout(self.wo(out)), (k, v)
