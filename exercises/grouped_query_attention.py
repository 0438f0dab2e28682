"""Grouped-query attention: many query heads share a few key/value heads, and the KV cache shrinks.

When a model generates text it keeps the keys and values of every position it has seen (the KV
cache), in every layer: 2 (keys and values) * n_layers * batch * seq_len * n_kv_heads * head_dim
numbers. For a large model and a long context that cache, not the weights, fills the GPU. Queries
are never cached: each new token makes its own and throws it away.

So keep all n_heads query heads, but give keys and values only n_kv_heads heads, each shared by a
group of n_heads // n_kv_heads query heads. Query head h reads key/value head
h // (n_heads // n_kv_heads): with 8 query heads and 2 key/value heads, heads 0-3 read kv head 0
and heads 4-7 read kv head 1. The cache and wk, wv shrink by n_heads / n_kv_heads; the queries
still look for n_heads different things, they only look in fewer places. The two ends are named:
n_kv_heads == n_heads is multi-head attention (nothing shared), n_kv_heads == 1 is multi-query
attention (every query head reads the one key/value head). Llama 2 70B and its successors use 8.

Sharing costs no new idea in the computation: project keys and values to n_kv_heads heads, then
repeat each one n_heads // n_kv_heads times next to itself, kv0, kv0, kv1, kv1, ... (llama's
repeat_kv, or k.repeat_interleave(n_rep, dim=1)), and attend exactly as multi-head attention does.
k.repeat(1, n_rep, 1, 1) has the same shape and the wrong order: it tiles them, kv0, kv1, kv0, kv1,
so head h would read kv head h % n_kv_heads.

Shapes: x (B, T, dim); wq(x) -> (B, n_heads, T, head_dim); wk(x), wv(x) -> (B, n_kv_heads, T,
head_dim), repeated to (B, n_heads, T, head_dim); scores (B, n_heads, T, T); out (B, T, dim).
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention: x (B, T, dim) -> (B, T, dim).

    Args:
        args: ModelArgs with dim, n_heads and dropout.
        n_kv_heads: how many key/value heads; n_heads must be a multiple of it.

    Raises:
        ValueError when args.dim % args.n_heads != 0 or args.n_heads % n_kv_heads != 0.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        wq: nn.Linear(dim, dim, bias=False)
        wk, wv: nn.Linear(dim, n_kv_heads * head_dim, bias=False), head_dim = dim // n_heads
        wo: nn.Linear(dim, dim, bias=False)
        attn_dropout, resid_dropout: nn.Dropout(args.dropout), on the attention weights and on the output
    """

    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        # TODO: raise ValueError when args.dim % args.n_heads or args.n_heads % n_kv_heads is not 0, with a message
        #   that names the numbers; keep n_heads, n_kv_heads, head_dim and n_rep = n_heads // n_kv_heads; create wq,
        #   wk, wv, wo (wk and wv project to n_kv_heads * head_dim features), attn_dropout, resid_dropout.
        raise NotImplementedError("grouped_query_attention: check the divisions, create wq, wk, wv, wo and dropouts")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Causal self-attention in n_heads query heads over n_kv_heads shared key/value heads.

        Args:
            x: (B, T, dim).
            mask: optional extra keep mask broadcastable to (B, n_heads, T, T): nonzero = may attend,
                0 = blocked; applied on top of the causal mask (position i sees keys 0..i).

        Returns:
            (B, T, dim).
        """
        # TODO:
        #   1. xq = self.wq(x).view(B, T, n_heads, head_dim).transpose(1, 2)      (B, nh, T, hd)
        #      xk, xv the same with n_kv_heads                                     (B, n_kv, T, hd)
        #   2. repeat each kv head n_rep times next to itself                       (B, nh, T, hd)
        #   3. scores = xq @ xk.transpose(-2, -1) / sqrt(head_dim); block j > i and mask == 0 with -inf
        #   4. softmax over the keys, self.attn_dropout, times xv; merge the heads  (B, T, dim)
        #   5. return self.resid_dropout(self.wo(merged))
        raise NotImplementedError("grouped_query_attention: project, repeat the kv heads, attend causally, merge")


def kv_cache_bytes(n_layers: int, batch: int, seq_len: int, n_kv_heads: int, head_dim: int,
                   bytes_per_value: int = 2) -> int:
    """The bytes a KV cache holds for a model with grouped-query attention.

    Args:
        n_layers: layers, each with its own cache.
        batch: sequences decoded side by side.
        seq_len: positions cached per sequence.
        n_kv_heads, head_dim: the key/value heads and their width.
        bytes_per_value: 2 for float16 and bfloat16, 4 for float32.

    Returns:
        An int: keys and values, for every layer, sequence, position, kv head and feature.
    """
    # TODO: count what is cached: keys and values (two tensors), each (batch, n_kv_heads, seq_len, head_dim), per layer.
    raise NotImplementedError("grouped_query_attention: count the bytes of the cached keys and values")
