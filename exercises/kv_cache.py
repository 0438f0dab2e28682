"""A KV cache: decode one token at a time without recomputing the keys and values of the past.

A language model writes a sequence one token per step, and at every step the new token attends
to all the tokens before it. Recomputing the whole prefix each step costs O(T) projections per
step, O(T^2) in all. But in causal attention nothing about a past token ever changes once it is
written: its key and value depend only on itself (and on its position, through RoPE), and it
never attends to what comes after it. So keep them: the cache holds the keys and values of every
position seen so far, and a step computes the query, key and value of the new token only, appends
its key and value to the cache, and attends from the one new query over all the cached keys.

Why this is exact, not an approximation. Row t of causal attention is

    out[t] = sum_{j <= t} softmax_j(q_t . k_j / sqrt(head_dim)) v_j

and it reads q_t, and k_j, v_j for j <= t: nothing a later token changes. A step with the cache
computes exactly this row. Two things must stay right for it to be the same number:

- positions: the new tokens sit at positions T_past .. T_past + T - 1, where T_past is how many
  the cache holds. RoPE must turn them by those positions, not by 0 .. T-1 (a step of one token
  would otherwise always be at position 0);
- the mask: the T new queries see all T_past cached keys and the new keys up to their own, so
  query t keeps key j when j <= T_past + t: the lower triangle of a (T, T_past + T) matrix with its
  diagonal shifted right by T_past, torch.ones(T, T_past + T).tril(diagonal=T_past). A (T, T)
  triangle, or F.scaled_dot_product_attention(..., is_causal=True) (which aligns its triangle
  top-left), is right only when T_past = 0. With one new token, nothing needs masking.

Cache the keys *after* RoPE: a key's rotation depends only on its own position, so it is turned
once, when it is made, and stored turned. The cache is a pair (k, v), each
(B, n_heads, T_past, head_dim); append along dim 2, the positions. The positions are bounded by
the RoPE tables: past max_seq_len there is no angle, so refuse with a ValueError.

Prefill, then steps: one call on the whole prompt (cache=None, positions 0 .. T-1) returns the
cache of the prompt; each later call passes that cache and gets it back one position longer.
Decoding token by token gives the same outputs as one call on the whole sequence.
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch
from torch import nn

from .config import ModelArgs
from .rope import RotaryEmbedding  # noqa: F401  (your rope.py: build self.rope with it)


class CachedSelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE and a KV cache: x (B, T, dim) -> (out (B, T, dim), cache).

    Args:
        args: ModelArgs with dim, n_heads, dropout and max_seq_len.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        n_heads, head_dim = dim // n_heads
        wq, wk, wv, wo: nn.Linear(dim, dim, bias=False)
        rope: RotaryEmbedding(head_dim, args.max_seq_len), from rope.py
        attn_dropout, resid_dropout: nn.Dropout(args.dropout), on the attention weights and on the output
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        # TODO: set n_heads, head_dim (and keep args.max_seq_len); create wq, wk, wv, wo, rope, attn_dropout,
        #   resid_dropout.
        raise NotImplementedError("kv_cache: create wq, wk, wv, wo, rope and the two dropouts")

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Attend from the T new tokens over the cached positions and themselves, causally.

        Args:
            x: (B, T, dim), the new tokens.
            cache: None (the tokens start at position 0), or (k, v), each (B, n_heads, T_past, head_dim):
                the keys (after RoPE) and the values of the T_past positions before.

        Returns:
            out: (B, T, dim).
            cache: (k, v), each (B, n_heads, T_past + T, head_dim): the old entries, then the new ones.

        Raises:
            ValueError when T_past + T > max_seq_len.
        """
        # TODO: T_past from the cache; refuse past max_seq_len; q, k, v split into heads (B, n_heads, T, head_dim);
        #   rotate q and k at positions T_past .. T_past + T - 1; append k and v to the cache along dim 2; scores
        #   over all T_past + T keys, masked with tril(diagonal=T_past); softmax, attn_dropout, the values; merge
        #   the heads, wo, resid_dropout; return the output and the new cache.
        raise NotImplementedError("kv_cache: attend over the cached and the new keys, and return the grown cache")
