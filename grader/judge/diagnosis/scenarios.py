"""`scenarios` holds each exercise's scenario: fixed inputs (seeded) and the calls a test would make, as facets.

A scenario runs the same on every implementation (the submission, the reference, each known mistake),
so that their facets can be compared name by name.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode

from grader.host.remote import Remote
from grader.judge import rates
from grader.judge.branches import BRANCHES, branch_verdict, branch_weights
from grader.judge.checks import count_ops, describe, manual_seed
from grader.judge.diagnosis.observe import SEED, Built, Implementation, Raised, ScenarioRun, outcome, plain
from grader.judge.expect import expect_tensor
from grader.judge.structure import load_parameters

F64 = torch.float64


def attention_scenario(run: ScenarioRun) -> None:
    def attention(*args: object, **kwargs: object) -> object:
        return run.impl.attention.attention(*args, **kwargs)

    q, k, v = run.randn(2, 3, 5, 8), run.randn(2, 3, 7, 8), run.randn(2, 3, 7, 4)
    mask, keep = run.keep_mask(2, 1, 5, 7), run.dropout_mask(2, 3, 5, 7)
    run.record("batch and heads", lambda: attention(q, k, v))
    run.record("no leading dims", lambda: attention(q[0, 0], k[0, 0], v[0, 0]))
    run.record("keep mask", lambda: attention(q, k, v, mask=mask))
    run.record("fixed dropout", lambda: attention(q, k, v, dropout=run.impl.probes.FixedMask(keep)))
    run.record("large scores", lambda: attention(q * 100, k * 100, v))
    run.record("float64 dtypes", lambda: _dtypes(attention(q.double(), k.double(), v.double())))
    q64, k64, v64 = run.randn(1, 4, 8, dtype=F64), run.randn(1, 6, 8, dtype=F64), run.randn(1, 6, 3, dtype=F64)
    run.record("float64, batch of one, T_q < T_k", lambda: attention(q64, k64, v64))


def masking_scenario(run: ScenarioRun) -> None:
    x, short, long = run.randn(2, 6, 3), run.randn(1, 4, 2), run.randn(1, 32, 2)
    x64, w64 = run.randn(1, 7, 2, dtype=F64), run.randn(3, 2, 4, 4, dtype=F64)
    w = run.randn(2, 5, 5)
    w[:, 2, 1], w[:, 4, 0] = 0.0, 0.0  # genuine scores of 0 must not be blocked
    run.record("causal_average", lambda: run.impl.masking.causal_average(x))
    run.record("causal_average float64", lambda: _dtypes(run.impl.masking.causal_average(x.double())))
    run.record("causal_average float64 values, batch of one", lambda: run.impl.masking.causal_average(x64))
    # Costly: the worker's first op count takes seconds, unless the suite's own count has warmed it.
    run.record("causal_average op growth", lambda: _op_growth(run.impl.masking.causal_average, short, long),
               costly=True)
    run.record("weight_mask_and_normalization", lambda: run.impl.masking.weight_mask_and_normalization(w))
    run.record("weight_mask_and_normalization 2D", lambda: run.impl.masking.weight_mask_and_normalization(w[0]))
    run.record("weight_mask_and_normalization float64, two leading dims",
               lambda: run.impl.masking.weight_mask_and_normalization(w64))
    run.record("create_look_ahead_mask", lambda: _nonzero(run.impl.masking.create_look_ahead_mask(5)))
    run.record("causal_mask", lambda: _additive(run.impl.masking.causal_mask(5)))


def head_attention_scenario(run: ScenarioRun) -> None:
    m = run.module("HeadAttention", lambda impl: impl.head_attention.HeadAttention(12, 4, 8, 0.0))
    full, short, keep = run.randn(2, 8, 12), run.randn(2, 5, 12), run.dropout_mask(2, 5, 5)
    run.record("T = block_size", lambda: m(full))
    run.record("T < block_size", lambda: m(short))
    run.record("one token", lambda: m(short[:, :1]))
    m64 = run.module("HeadAttention", lambda impl: impl.head_attention.HeadAttention(12, 4, 8, 0.0), dtype=F64)
    x64 = run.randn(1, 7, 12, dtype=F64)
    run.record("float64, batch of one", lambda: m64(x64))
    run.record("fixed dropout", lambda: _swap(run, m, "dropout", run.impl.probes.FixedMask(keep))(short))
    _record_dropout(run, "HeadAttention", lambda impl, *p: impl.head_attention.HeadAttention(12, 8, 8, *p))


def multi_head_attention_scenario(run: ScenarioRun) -> None:
    def mha(impl: Implementation, is_causal: bool, dim: int = 16, n_heads: int = 4) -> Built:
        args = impl.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=0.0, max_seq_len=8)
        return impl.multi_head_attention.MultiHeadAttention(args, is_causal=is_causal)

    run.record("dim 10, 4 heads", lambda: _refused(lambda: mha(run.impl, False, dim=10)))
    non_causal = run.module("MultiHeadAttention", lambda impl: mha(impl, False))
    causal = run.module("MultiHeadAttention causal", lambda impl: mha(impl, True))
    x, q, kv = run.randn(2, 5, 16), run.randn(2, 3, 16), run.randn(2, 6, 16)
    pad, on_weights, on_output = run.padding(2, 5), run.dropout_mask(2, 4, 5, 5), run.dropout_mask(2, 5, 16)
    run.record("self-attention", lambda: non_causal(x, x, x))
    run.record("cross-attention", lambda: non_causal(q, kv, kv))
    run.record("padding mask", lambda: non_causal(x, x, x, pad))
    run.record("causal", lambda: causal(x, x, x))
    run.record("causal and padding mask", lambda: causal(x, x, x, pad))
    # With 16 features in 4 heads, head_dim = sqrt(dim): dividing by sqrt(dim) and dividing by sqrt(head_dim) twice
    # coincide. Two heads of 8 tell them apart.
    wide = run.module("MultiHeadAttention, 2 heads", lambda impl: mha(impl, False, n_heads=2))
    run.record("self-attention, 2 heads of 8", lambda: wide(x, x, x))
    wide64 = run.module("MultiHeadAttention, 2 heads", lambda impl: mha(impl, False, n_heads=2), dtype=F64)
    q64, kv64 = run.randn(1, 2, 16, dtype=F64), run.randn(1, 7, 16, dtype=F64)
    run.record("float64 cross-attention, batch of one, 2 heads of 8", lambda: wide64(q64, kv64, kv64))
    dropped = run.module("MultiHeadAttention", lambda impl: mha(impl, False))

    def with_fixed_dropout() -> object:
        return run.impl.probes.swap(dropped, {"attn_dropout": run.impl.probes.FixedMask(on_weights),
                                              "resid_dropout": run.impl.probes.FixedMask(on_output)})(x, x, x)

    run.record("fixed dropout", with_fixed_dropout)

    def built_with(impl: Implementation, *p: float) -> Built:
        dropout = {"dropout": p[0]} if p else {}
        return impl.multi_head_attention.MultiHeadAttention(impl.config.ModelArgs(dim=16, n_heads=4, **dropout))

    _record_dropout(run, "MultiHeadAttention", built_with)


def positional_encoding_scenario(run: ScenarioRun) -> None:
    m = run.module("PositionalEncoding", lambda impl: impl.positional_encoding.PositionalEncoding(6, 10, 0.0))
    dropping = run.module("PositionalEncoding", lambda impl: impl.positional_encoding.PositionalEncoding(6, 10, 0.5))
    x = run.randn(2, 4, 6)
    run.record("output", lambda: m(x))
    x64 = run.randn(1, 10, 6, dtype=F64)
    run.record("float64 input, batch of one, every position", lambda: m(x64))
    # The suite lets F.dropout stand for self.dropout here, so no fixed stand-in: real dropout, same seed.
    run.record("training mode, seeded dropout", lambda: run.seeded(lambda: dropping.train()(x)))
    _record_dropout(run, "PositionalEncoding",
                    lambda impl, *p: impl.positional_encoding.PositionalEncoding(6, 10, *p))


def sublayers_scenario(run: ScenarioRun) -> None:
    ff = run.module("FeedForward", lambda impl: impl.sublayers.FeedForward(6, 10, 0.0))
    rc = run.module("ResidualConnection", lambda impl: impl.sublayers.ResidualConnection(6, 0.0))
    sublayer = run.module("sublayer", lambda impl: impl.torch.nn.Linear(6, 6))  # mixes features, unlike a scale
    x, hidden, keep = run.randn(2, 4, 6), run.dropout_mask(2, 4, 10), run.dropout_mask(2, 4, 6)
    run.record("FeedForward", lambda: ff(x))
    run.record("FeedForward, fixed dropout", lambda: _swap(run, ff, "dropout", run.impl.probes.FixedMask(hidden))(x))
    run.record("ResidualConnection", lambda: rc(x, sublayer))
    ff64 = run.module("FeedForward", lambda impl: impl.sublayers.FeedForward(6, 10, 0.0), dtype=F64)
    rc64 = run.module("ResidualConnection", lambda impl: impl.sublayers.ResidualConnection(6, 0.0), dtype=F64)
    sublayer64 = run.module("sublayer", lambda impl: impl.torch.nn.Linear(6, 6), dtype=F64)
    x64 = run.randn(1, 3, 6, dtype=F64)
    run.record("FeedForward float64, batch of one", lambda: ff64(x64))
    run.record("ResidualConnection float64, batch of one", lambda: rc64(x64, sublayer64))
    run.record("ResidualConnection, fixed dropout",
               lambda: _swap(run, rc, "dropout", run.impl.probes.FixedMask(keep))(x, sublayer))
    _record_dropout(run, "FeedForward", lambda impl, *p: impl.sublayers.FeedForward(6, 10, *p))
    _record_dropout(run, "ResidualConnection", lambda impl, *p: impl.sublayers.ResidualConnection(6, *p))


def encoder_scenario(run: ScenarioRun) -> None:
    m = run.module("Encoder", lambda impl: impl.encoder.Encoder(2, 8, 2, 12, 0.0))
    x, pad = run.randn(2, 5, 8), run.padding(2, 5)
    run.record("output", lambda: m(x))
    run.record("padding mask", lambda: m(x, pad))
    m64 = run.module("Encoder", lambda impl: impl.encoder.Encoder(2, 8, 2, 12, 0.0), dtype=F64)
    x64, pad64 = run.randn(1, 4, 8, dtype=F64), run.padding(1, 4)
    run.record("float64, batch of one, padding mask", lambda: m64(x64, pad64))
    _record_dropout(run, "EncoderLayer", lambda impl, *p: impl.encoder.EncoderLayer(8, 2, 12, *p))
    _record_branches(run, "EncoderLayer", lambda impl: impl.encoder.EncoderLayer(8, 2, 12, 0.3))
    _record_dropout(run, "Encoder", lambda impl, *p: impl.encoder.Encoder(2, 8, 2, 12, *p))
    _record_draws(run, "Encoder", lambda impl: impl.encoder.Encoder(2, 8, 2, 12, 0.3), x, pad)


def decoder_scenario(run: ScenarioRun) -> None:
    m = run.module("Decoder", lambda impl: impl.decoder.Decoder(2, 8, 2, 12, 0.0, 8))
    x, memory = run.randn(2, 5, 8), run.randn(2, 6, 8)
    src, tgt = run.padding(2, 6), run.padding(2, 5)
    run.record("output", lambda: m(x, memory))
    run.record("src_mask", lambda: m(x, memory, src, None))
    run.record("tgt_mask", lambda: m(x, memory, None, tgt))
    run.record("both masks", lambda: m(x, memory, src, tgt))
    m64 = run.module("Decoder", lambda impl: impl.decoder.Decoder(2, 8, 2, 12, 0.0, 8), dtype=F64)
    x64, memory64, src64, tgt64 = run.randn(1, 7, 8, dtype=F64), run.randn(1, 3, 8, dtype=F64), run.padding(1, 3), \
        run.padding(1, 7)
    run.record("float64, batch of one, target longer than memory, both masks",
               lambda: m64(x64, memory64, src64, tgt64))
    _record_dropout(run, "DecoderLayer", lambda impl, *p: impl.decoder.DecoderLayer(8, 2, 12, *p))
    _record_branches(run, "DecoderLayer", lambda impl: impl.decoder.DecoderLayer(8, 2, 12, 0.3))
    _record_dropout(run, "Decoder", lambda impl, *p: impl.decoder.Decoder(2, 8, 2, 12, *p))
    _record_draws(run, "Decoder", lambda impl: impl.decoder.Decoder(2, 8, 2, 12, 0.3), x, memory, src, tgt)


def transformer_scenario(run: ScenarioRun) -> None:
    def make(impl: Implementation) -> Built:
        return impl.transformer.Transformer(11, 13, d_model=16, n_heads=2, n_layers=1, d_ff=16, dropout=0.0,
                                            max_seq_len=16)

    m = run.module("Transformer", make)
    src, tgt, src_mask = run.tokens(11, 2, 6), run.tokens(13, 2, 5), run.padding(2, 6)
    run.record("logits", lambda: m(src, tgt))
    run.record("logits with src_mask", lambda: m(src, tgt, src_mask))
    m64 = run.module("Transformer", make, dtype=F64)
    src1, tgt1 = run.tokens(11, 1, 3), run.tokens(13, 1, 7)
    run.record("float64 logits, batch of one, target longer than source", lambda: m64(src1, tgt1))
    run.record("greedy_decode", lambda: run.impl.transformer.greedy_decode(m, src, 8, 1))
    run.record("structure with the default sizes", lambda: _structure(run.impl.transformer.Transformer(11, 13)))

    def built_with(impl: Implementation, *p: float) -> Built:
        return impl.transformer.Transformer(11, 13, d_model=16, n_heads=2, d_ff=16, max_seq_len=16,
                                            **({"dropout": p[0]} if p else {}))

    _record_dropout(run, "Transformer", built_with, default=0.1)

    memory = run.randn(2, 6, 16)

    def decode_draws() -> bool:
        t = built_with(run.impl, 0.3).to(run.dtype).train()
        looked_up, table = t.tgt_embed(tgt), t.tgt_embed.weight
        scaled = looked_up if torch.allclose(looked_up, table[tgt] * 4.0) else looked_up * 4.0  # sqrt(16)
        run.impl.torch.manual_seed(SEED)
        whole = t.decode(memory, tgt, src_mask)
        run.impl.torch.manual_seed(SEED)
        return bool(torch.allclose(whole, t.decoder(t.pos(scaled), memory, src_mask, None), atol=1e-5))

    run.record("decode in training mode (dropout 0.3) is decoder(pos(embedded tgt), memory), draw for draw",
               decode_draws)


def rope_scenario(run: ScenarioRun) -> None:
    angles = torch.outer(torch.arange(12, dtype=F64), 10000.0 ** (-torch.arange(0, 6, 2, dtype=F64) / 6))
    cos, sin = angles.cos().float().to(run.device), angles.sin().float().to(run.device)  # the contract's tables
    x, x64 = run.randn(2, 3, 5, 6), run.randn(4, 6, dtype=F64)
    positions = torch.tensor([4, 7, 11]).to(run.device)
    run.record("rope_tables(6, 10)", lambda: run.impl.rope.rope_tables(6, 10))
    run.record("rope_tables(8, 12, base 100)", lambda: run.impl.rope.rope_tables(8, 12, 100.0))
    run.record("apply_rope, (B, n_heads, T, head_dim)", lambda: run.impl.rope.apply_rope(x, cos, sin))
    run.record("apply_rope at positions 4, 7, 11", lambda: run.impl.rope.apply_rope(x[:, 0, :3], cos, sin, positions))
    run.record("apply_rope float64, no leading dims", lambda: run.impl.rope.apply_rope(x64, cos, sin))
    m = run.module("RotaryEmbedding", lambda impl: impl.rope.RotaryEmbedding(6, 12))
    q, k = run.randn(1, 4, 3, 6), run.randn(1, 2, 3, 6)
    run.record("RotaryEmbedding(q, k, positions)", lambda: m(q, k, positions))


def kv_cache_scenario(run: ScenarioRun) -> None:
    def cached(impl: Implementation) -> Built:
        return impl.kv_cache.CachedSelfAttention(impl.config.ModelArgs(dim=16, n_heads=4, max_seq_len=8))

    def decoded(m: Built, x: torch.Tensor, schedule: tuple[int, ...]) -> object:
        outs, cache, start = [], None, 0
        for size in schedule:
            out, cache = m(x[:, start:start + size], cache)
            outs.append(out)
            start += size
        return (*outs, *cache)

    def refused(compute: Callable[[], object]) -> str:
        result = outcome(compute)
        return result.error if isinstance(result, Raised) else "returned"

    m = run.module("CachedSelfAttention", cached)
    x = run.randn(2, 8, 16)
    run.record("prefill of 5", lambda: m(x[:, :5]))
    run.record("prefill of 3, then 3 steps", lambda: decoded(m, x, (3, 1, 1, 1)))
    run.record("prefill of 3, then a chunk of 3", lambda: decoded(m, x, (3, 3)))
    long = run.randn(1, 9, 16)
    run.record("9 tokens, max_seq_len 8", lambda: refused(lambda: m(long)))
    run.record("6 cached, then 3 tokens, max_seq_len 8", lambda: refused(lambda: decoded(m, long, (6, 3))))
    m64 = run.module("CachedSelfAttention", cached, dtype=F64)
    x64 = run.randn(1, 4, 16, dtype=F64)
    run.record("float64, batch of one, prefill of 2 then 2 steps", lambda: decoded(m64, x64, (2, 1, 1)))


def grouped_query_attention_scenario(run: ScenarioRun) -> None:
    def gqa(impl: Implementation, n_kv_heads: int, n_heads: int = 4) -> Built:
        args = impl.config.ModelArgs(dim=16, n_heads=n_heads, dropout=0.0, max_seq_len=8)
        return impl.grouped_query_attention.GroupedQueryAttention(args, n_kv_heads)

    run.record("4 query heads over 3 kv heads", lambda: _refused(lambda: gqa(run.impl, 3)))
    grouped = run.module("GroupedQueryAttention, 2 kv heads", lambda impl: gqa(impl, 2))
    single = run.module("GroupedQueryAttention, 1 kv head", lambda impl: gqa(impl, 1))
    x, pad = run.randn(2, 5, 16), run.padding(2, 5)
    run.record("4 query heads over 2 kv heads", lambda: grouped(x))
    run.record("4 query heads over 2 kv heads, padding mask", lambda: grouped(x, pad))
    run.record("one kv head", lambda: single(x))
    grouped64 = run.module("GroupedQueryAttention, 2 kv heads", lambda impl: gqa(impl, 2), dtype=F64)
    x64 = run.randn(1, 7, 16, dtype=F64)
    run.record("float64, batch of one, 2 kv heads", lambda: grouped64(x64))
    run.record("kv_cache_bytes", lambda: run.impl.grouped_query_attention.kv_cache_bytes(3, 5, 11, 7, 13, 4))
    run.record("kv_cache_bytes, default bytes_per_value",
               lambda: run.impl.grouped_query_attention.kv_cache_bytes(32, 1, 4096, 8, 128))


def flash_attention_scenario(run: ScenarioRun) -> None:
    def flash(*args: object, **kwargs: object) -> object:
        return run.impl.flash_attention.flash_attention(*args, **kwargs)

    q, k, v = run.randn(2, 3, 20, 8), run.randn(2, 3, 28, 8), run.randn(2, 3, 28, 8)
    run.record("20 queries, 28 keys, tiles of 8", lambda: flash(q, k, v, block_size=8))
    run.record("causal, 20 positions, tiles of 8", lambda: flash(q, k[..., :20, :], v[..., :20, :], causal=True,
                                                                 block_size=8))
    run.record("causal, 20 positions, tiles of 6", lambda: flash(q, k[..., :20, :], v[..., :20, :], causal=True,
                                                                 block_size=6))
    run.record("causal, 20 queries, 28 keys", lambda: _refused(lambda: flash(q, k, v, causal=True, block_size=8)))
    run.record("float64 dtypes", lambda: _dtypes(flash(q.double(), k.double(), v.double(), block_size=8)))
    q64, k64, v64 = run.randn(9, 8, dtype=F64), run.randn(13, 8, dtype=F64), run.randn(13, 8, dtype=F64)
    run.record("float64, no leading dims, tiles of 5", lambda: flash(q64, k64, v64, block_size=5))
    short, long = run.randn(1, 16, 8), run.randn(1, 64, 8)
    # Costly: the worker's first op count takes seconds. Tiles of 8 make 2 x 2 tiles at T = 16 and 8 x 8 at T = 64;
    # the whole (T, T) matrix at once is as many operations at either length.
    run.record("tiles grow with T", lambda: _tiles_grow(run.impl.flash_attention.flash_attention, short, long,
                                                        block_size=8), costly=True)


def sliding_window_scenario(run: ScenarioRun) -> None:
    sw = run.impl.sliding_window
    run.record("sliding_window_mask(6, 2)", lambda: sw.sliding_window_mask(6, 2))
    run.record("sliding_window_mask(5, 3)", lambda: sw.sliding_window_mask(5, 3))
    keep, square = run.keep_mask(4, 6), run.keep_mask(5, 5)
    padding = run.padding(2, 6).view(2, 6)
    run.record("combine_masks, 4 queries, 6 keys", lambda: sw.combine_masks(keep, padding))
    run.record("combine_masks, 5 queries, 5 keys", lambda: sw.combine_masks(square, run.padding(2, 5).view(2, 5)))
    q, k, v = run.randn(2, 3, 5, 8), run.randn(2, 3, 7, 8), run.randn(2, 3, 7, 4)
    kept = run.keep_mask(2, 1, 5, 7)
    run.record("masked_attention", lambda: sw.masked_attention(q, k, v, kept))
    empty = kept.clone()
    empty[1, :, 3] = False  # query 3 of batch element 1 may see no key
    run.record("masked_attention, a query with no key", lambda: sw.masked_attention(q, k, v, empty))
    q64, k64, v64 = run.randn(1, 4, 8, dtype=F64), run.randn(1, 6, 8, dtype=F64), run.randn(1, 6, 3, dtype=F64)
    empty64 = run.keep_mask(1, 4, 6)
    empty64[0, 0] = False
    run.record("masked_attention float64, batch of one, a query with no key",
               lambda: sw.masked_attention(q64, k64, v64, empty64))
    chunks = [run.randn(1, 2, count, 3) for count in (2, 1, 1, 3)]

    def rolled() -> object:
        cache = sw.RollingKVCache(3)
        return tuple(cache.update(chunk, -chunk) for chunk in chunks)

    run.record("RollingKVCache(3), updates of 2, 1, 1 and 3 positions", rolled)


def tiny_gpt_scenario(run: ScenarioRun) -> None:
    """The reference's weights reach a TinyGPT only through its parameters' names (inner names are free): one that
    names its layers otherwise gets other weights, agrees with no known mistake on any output, and is never named;
    one that keeps llama's names (attention.wq, feed_forward.w1, ...) is compared output for output."""
    def make(impl: Implementation) -> Built:
        return impl.tiny_gpt.TinyGPT(11, dim=16, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=64)

    def decoded(m: Built, idx: torch.Tensor, schedule: tuple[int, ...]) -> object:
        """The logits of each call, each chunk fed with the cache the previous call returned, and how many numbers
        the last cache holds (its layout is free; its size is not: n_kv_heads wide)."""
        outs, cache, start = [], None, 0
        for size in schedule:
            logits, cache = m(idx[:, start:start + size]) if cache is None else m(idx[:, start:start + size], cache)
            outs.append(logits)
            start += size
        return (*outs, _numel(cache))

    m = run.module("TinyGPT", make)
    idx = run.tokens(11, 2, 8)
    run.record("one call on 8 tokens", lambda: decoded(m, idx, (8,)))
    run.record("prompt of 3, then 5 steps", lambda: decoded(m, idx, (3, 1, 1, 1, 1, 1)))
    run.record("prompt of 3, then a chunk of 5", lambda: decoded(m, idx, (3, 5)))
    m64 = run.module("TinyGPT", make, dtype=F64)
    idx1 = run.tokens(11, 1, 5)
    run.record("float64, batch of one, prompt of 2 then 3 steps", lambda: decoded(m64, idx1, (2, 1, 1, 1)))
    run.record("generate 4 after a prompt of 3", lambda: run.impl.tiny_gpt.generate(m, idx[:, :3], 4))


SCENARIOS: dict[str, Callable[[ScenarioRun], None]] = {
    "attention": attention_scenario,
    "masking": masking_scenario,
    "head_attention": head_attention_scenario,
    "multi_head_attention": multi_head_attention_scenario,
    "positional_encoding": positional_encoding_scenario,
    "sublayers": sublayers_scenario,
    "encoder": encoder_scenario,
    "decoder": decoder_scenario,
    "transformer": transformer_scenario,
    "rope": rope_scenario,
    "kv_cache": kv_cache_scenario,
    "grouped_query_attention": grouped_query_attention_scenario,
    "flash_attention": flash_attention_scenario,
    "sliding_window": sliding_window_scenario,
    "tiny_gpt": tiny_gpt_scenario,
}


def run_scenario(exercise: str, impl: Implementation, *, dtype: torch.dtype = torch.float32, device: str = "cpu",
                 lazy: bool = False) -> ScenarioRun:
    """Run `exercise`'s scenario on `impl`, torch's global random state seeded and then put back."""
    run = ScenarioRun(impl, dtype, device, lazy)
    with torch.random.fork_rng(devices=[]):
        manual_seed(SEED)
        SCENARIOS[exercise](run)
    return run


# --- what a scenario observes beyond plain outputs -------------------------------------------------


def _record_dropout(run: ScenarioRun, kind: str, make: Callable[..., Built], *, default: float = 0.0) -> None:
    """Facets of how each contract part of `kind` drops in training mode (see grader.judge.rates), built
    with the default dropout and with 0.3: whether it drops as p says, never, or at some other rate."""
    for p, given in ((default, ()), (0.3, (0.3,))):
        label = "without a dropout argument" if not given else "with dropout=0.3"

        def traces(p: float = p, given: tuple[float, ...] = given) -> tuple[object, ...]:
            m = make(run.impl, *given)
            return tuple(trace.facet(p) for _, trace in rates.traces(rates.parts(kind), m, what=kind))

        run.record(f"{kind} {label}, training mode", lambda traces=traces: run.seeded(traces))


def _record_draws(run: ScenarioRun, kind: str, make: Callable[[Implementation], Built], *inputs: object) -> None:
    """Whether a stack (two layers, dropout 0.3) in training mode is its layers in turn then norm, draw for draw:
    a dropout of the stack's own (on the memory, between layers) draws more."""

    def same() -> bool:
        m = make(run.impl).to(run.dtype).train()
        run.impl.torch.manual_seed(SEED)
        whole = m(*inputs)
        run.impl.torch.manual_seed(SEED)
        y = inputs[0]
        for i in range(2):
            y = m.get_submodule(f"layers.{i}")(y, *inputs[1:])
        return bool(torch.allclose(whole, m.norm(y), atol=1e-5))

    run.record(f"{kind}(..., dropout=0.3) in training mode is its layers then norm, draw for draw", same)


def _record_branches(run: ScenarioRun, kind: str, make: Callable[[Implementation], Built]) -> None:
    """One facet of how a layer (d_model 8, 2 heads, dropout 0.3) drops each sublayer's output, each sublayer
    seen alone (see grader.judge.branches): once as it should, more, fewer, or unevenly across a head's
    features. One facet for all sublayers, so that a mistake is named only where every sublayer agrees."""

    def verdict(live: str, chained: int) -> str:
        m = make(run.impl)
        shapes = {name: torch.zeros(info["shape"]) for name, info in describe(m).parameters.items()}
        load_parameters(m, branch_weights(shapes, live), name=kind, names_hint="")
        x = torch.zeros(64, 8, 8)
        out = m.train()(x, torch.ones(64, 6, 8)) if kind == "DecoderLayer" else m.train()(x)
        return branch_verdict(expect_tensor(out, name=kind), groups=1 if live == "feed_forward" else 2, p=0.3,
                              chained=chained)[0]

    run.record(f"{kind}(..., dropout=0.3) in training mode, each sublayer's contribution",
               lambda: tuple(run.seeded(lambda live=live, n=n: verdict(live, n)) for live, n in BRANCHES[kind].items()))


def _structure(m: Built) -> tuple[tuple[str, tuple[int, ...]], ...]:
    info = describe(m)
    return tuple(sorted((name, tuple(p["shape"])) for name, p in info.parameters.items()))


def _swap(run: ScenarioRun, m: Built, name: str, sub: Built) -> Built:
    return run.impl.probes.swap(m, {name: sub})


def _dtypes(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return str(value.dtype)
    if isinstance(value, (tuple, list)):
        return tuple(_dtypes(v) for v in value)
    return plain(value)


def _nonzero(value: object) -> object:
    return value != 0 if isinstance(value, torch.Tensor) else value


def _additive(mask: object) -> object:
    """An additive mask as (blocked, the values where not blocked): -1e9 blocks as well as -inf."""
    if not isinstance(mask, torch.Tensor) or not mask.is_floating_point():
        return plain(mask)
    blocked = mask <= -1e9
    return blocked, mask.masked_fill(blocked, 0.0)


def _refused(build: Callable[[], object]) -> str:
    result = outcome(build)
    return "refused" if isinstance(result, Raised) and result.error in ("ValueError", "AssertionError") else "built"


def _op_growth(fn: Callable[[torch.Tensor], object], short: torch.Tensor, long: torch.Tensor) -> str:
    if isinstance(fn, Remote):  # counted by the worker, as the suite's vectorisation test counts
        at_short, at_long = count_ops(fn, short).total, count_ops(fn, long).total
    else:
        at_short, at_long = _torch_calls(fn, short), _torch_calls(fn, long)
    return "grows with T" if at_long > at_short + 4 else "constant"  # the margin the suite allows


def _tiles_grow(fn: Callable[..., object], short: torch.Tensor, long: torch.Tensor, **kwargs: object) -> str:
    """Whether `fn(x, x, x, **kwargs)` does more operations at the longer `x`: at a fixed tile size tiles do, one whole
    matrix does not. Counted as `_op_growth` counts: by the worker for the submission, by torch calls here."""
    if isinstance(fn, Remote):
        at_short = count_ops(fn, short, short, short, **kwargs).total
        at_long = count_ops(fn, long, long, long, **kwargs).total
    else:
        at_short = _torch_calls(lambda x: fn(x, x, x, **kwargs), short)
        at_long = _torch_calls(lambda x: fn(x, x, x, **kwargs), long)
    return "grows with T" if at_long > at_short + 4 else "constant"


def _torch_calls(fn: Callable[..., object], *args: object) -> int:
    """How many torch functions `fn` calls: trusted code's loops show as well as in aten ops, and the
    aten counter would cost this process seconds on first use, where the worker has paid it already."""
    calls = 0

    class CountCalls(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return func(*args, **(kwargs or {}))

    with CountCalls():
        fn(*args)
    return calls


def _numel(cache: object) -> object:
    """How many numbers a cache of any layout holds: its tensors counted through tuples, lists and dicts."""
    if isinstance(cache, torch.Tensor):
        return cache.numel()
    if isinstance(cache, dict):
        cache = list(cache.values())
    if isinstance(cache, (tuple, list)):
        sizes = [_numel(part) for part in cache]
        return sum(sizes) if all(isinstance(n, int) for n in sizes) else "<cache>"
    return "<cache>"
