"""A tiny GPT: the track's parts in one decoder-only model, and greedy generation with a KV cache.

    idx (B, T) -> tok_embed -> [block] x n_layers -> norm -> head -> logits (B, T, vocab)
    block:  x = x + attention(norm(x))       grouped-query, RoPE, causal, with a cache
            x = x + feed_forward(norm(x))

Pre-norm: each sublayer reads a normed copy of the residual stream and adds its output to the stream, which
is never normed itself until the final `norm` before the head. Gradients then flow down the stream untouched,
which is why llama, GPT-2 and every model since train deep stacks this way.

There is no positional table: RoPE rotates each query and key by its position, inside attention, so a score
depends on how far apart two tokens are. That matters for what this model must learn. The grader trains it on
rows like `7 2 9 4 7 2 9 4 7 ...` (a few distinct tokens repeated, the period different in every row): to
predict what follows the second `7`, the model must find the earlier `7` and copy what came after it. That is
an induction head, two heads in two layers: one that writes "the token before me was 7" into each position
(a relative-position job, RoPE's), one that looks for that note and copies the token there.

The cache: attention's keys and values of the positions already seen never change (causal attention: the past
does not see the future). So generate runs the prompt once, keeps every layer's keys (after RoPE) and values,
and then feeds ONE new token per call: it takes positions T_past .. T_past + T - 1, attends to the cached keys
and its own, and appends its keys and values to the cache. The logits are exactly those of one call on the
whole sequence, for a fraction of the work. With grouped-query attention the cache holds n_kv_heads heads per
layer, not n_heads: that is the memory grouping saves.
"""

import math  # noqa: F401  (math.sqrt, for the scores' scale)

import torch
from torch import nn

from .rope import RotaryEmbedding  # noqa: F401


class TinyGPT(nn.Module):
    """A decoder-only language model: idx (B, T) token ids -> logits (B, T, vocab) for the token after each, cache.

    Args:
        vocab: number of tokens.
        dim: width of the residual stream; head_dim = dim // n_heads.
        n_heads, n_kv_heads: query heads and key/value heads (n_heads % n_kv_heads == 0); query head h reads
            key/value head h // (n_heads // n_kv_heads).
        n_layers: number of blocks.
        max_seq_len: the longest sequence (RoPE's tables).

    REQUIRED ATTRIBUTE NAMES (the names inside each layer are yours):
        tok_embed: nn.Embedding(vocab, dim)
        layers: nn.ModuleList of n_layers pre-norm blocks (attention with wk, wv = nn.Linear(dim, n_kv_heads *
            head_dim, bias=False) and RoPE, then a feed-forward, e.g. llama's SwiGLU)
        norm: the final norm (nn.RMSNorm(dim), or nn.LayerNorm(dim))
        head: nn.Linear(dim, vocab, bias=False) (it may share its weight with tok_embed, as nanoGPT's does)
    """

    def __init__(self, vocab: int, dim: int = 64, n_heads: int = 4, n_kv_heads: int = 2, n_layers: int = 2,
                 max_seq_len: int = 128) -> None:
        super().__init__()
        # TODO: tok_embed, layers (a block class of your own), norm, head.
        raise NotImplementedError("tiny_gpt: create tok_embed, layers, norm and head")

    def forward(self, idx: torch.Tensor, cache: object = None) -> tuple[torch.Tensor, object]:
        """idx (B, T) -> (logits (B, T, vocab), cache).

        cache: None (the tokens start at position 0) or what the previous call returned; its layout is yours,
            e.g. a list with one (k, v) per layer, each (B, n_kv_heads, T_seen, head_dim), keys after RoPE.
        """
        # TODO: x = tok_embed(idx); each layer takes x and its part of the cache and returns both; then
        #   head(norm(x)). Raw logits, no softmax.
        raise NotImplementedError("tiny_gpt: forward = head(norm(layers(tok_embed(idx))))")


def generate(model: TinyGPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy generation: idx (B, T) -> (B, T + max_new_tokens), the prompt then the new tokens.

    Run the model once on the prompt; then each step appends the argmax over the vocabulary of the LAST
    position's logits and calls model(next_token, cache) with that one token (B, 1) and the cache.
    """
    # TODO: logits, cache = model(idx); then max_new_tokens times: next_token = logits[:, -1].argmax(dim=-1,
    #   keepdim=True), append it, and logits, cache = model(next_token, cache).
    raise NotImplementedError("tiny_gpt: generate, the prompt once, then one token per call with the cache")
