"""A tiny decoder-only GPT: pre-norm blocks of grouped-query attention with RoPE and a KV cache; greedy generate."""

import math

import torch
from torch import nn

from .rope import RotaryEmbedding


class Attention(nn.Module):
    """Causal grouped-query self-attention with RoPE that decodes with a cache: x (B, T, dim) -> (B, T, dim), cache.

    The cache is (k, v), each (B, n_kv_heads, T_seen, head_dim): the keys after RoPE and the values of every position
    seen, n_kv_heads wide (the saving grouped-query attention makes: the cache is what a long generation holds).
    """

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, max_seq_len: int) -> None:
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"dim {dim} is not divisible by n_heads {n_heads}")
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads {n_heads} is not divisible by n_kv_heads {n_kv_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.n_rep = n_heads // n_kv_heads  # query heads per key/value head
        self.max_seq_len = max_seq_len
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, max_seq_len)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        B, T, dim = x.shape
        T_past = 0 if cache is None else cache[0].size(2)
        if T_past + T > self.max_seq_len:
            raise ValueError(f"{T_past} cached and {T} new positions exceed max_seq_len {self.max_seq_len}")
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        positions = torch.arange(T_past, T_past + T, device=x.device)  # the new tokens come after the cached ones
        q, k = self.rope(q, k, positions)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)  # (B, n_kv, T_past + T, hd): keys are cached after RoPE
            v = torch.cat((cache[1], v), dim=2)
        cache = (k, v)  # cached n_kv_heads wide, before the heads are repeated for the queries
        k = k.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T_past + T, hd): query head h reads kv head h // n_rep
        v = v.repeat_interleave(self.n_rep, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh, T, T_past + T)
        # New token t sits at position T_past + t: it sees keys 0 .. T_past + t, the diagonal shifted by T_past.
        keep = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)
        p_attn = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)  # (B, nh, T, T_past + T)
        out = (p_attn @ v).transpose(1, 2).contiguous().view(B, T, dim)  # (B, T, dim)
        return self.wo(out), cache


class MLP(nn.Module):
    """llama's SwiGLU feed-forward: w2(silu(w1(x)) * w3(x)), (B, T, dim) -> (B, T, dim)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """A pre-norm block: x + attention(norm(x)), then x + feed_forward(norm(x)); the residual stream is never normed."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, max_seq_len: int) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(dim)
        self.attention = Attention(dim, n_heads, n_kv_heads, max_seq_len)
        self.ffn_norm = nn.RMSNorm(dim)
        self.feed_forward = MLP(dim, 4 * dim)

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        h, cache = self.attention(self.attention_norm(x), cache)
        x = x + h
        return x + self.feed_forward(self.ffn_norm(x)), cache


class TinyGPT(nn.Module):
    """A decoder-only language model: idx (B, T) token ids -> logits (B, T, vocab) for the token after each, cache.

    Attributes: `tok_embed` (nn.Embedding(vocab, dim)), `layers` (nn.ModuleList of n_layers Blocks), `norm` (the
    final RMSNorm), `head` (nn.Linear(dim, vocab, bias=False)). No positional table: RoPE, inside attention, is
    all the model knows of positions.
    """

    def __init__(self, vocab: int, dim: int = 64, n_heads: int = 4, n_kv_heads: int = 2, n_layers: int = 2,
                 max_seq_len: int = 128) -> None:
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, n_heads, n_kv_heads, max_seq_len) for _ in range(n_layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None
                ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """idx (B, T); cache None (positions from 0) or the list of (k, v) per layer the previous call returned."""
        x = self.tok_embed(idx)  # (B, T, dim)
        new_cache = []
        for i, layer in enumerate(self.layers):
            x, layer_cache = layer(x, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.head(self.norm(x)), new_cache  # (B, T, vocab): raw logits


@torch.no_grad()
def generate(model: TinyGPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Greedy: idx (B, T) -> (B, T + max_new_tokens). The prompt is run once; then one new token per call, with the
    cache holding the keys and values of everything before it."""
    logits, cache = model(idx)  # (B, T, vocab): the whole prompt, once
    for step in range(max_new_tokens):
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1): the most likely token after the last
        idx = torch.cat((idx, next_token), dim=1)
        if step + 1 < max_new_tokens:  # the last token needs no logits of its own
            logits, cache = model(next_token, cache)  # (B, 1, vocab): only the new token goes in
    return idx
