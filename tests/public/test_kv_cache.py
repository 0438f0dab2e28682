"""Public tests for exercises/kv_cache.py: a cached decode gives what one call on the whole sequence gives.

Run them with `grader check kv_cache`. They need no reference solution: the expected outputs are causal attention
with RoPE written out here in float64 (interleaved pairs, angle p * 10000^(-2i/head_dim)), decoded call by call as
a cache does, with the module's own weights; each tolerance comes from the same computation in float32.
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_tensor,
    expect_tuple,
    expect_weights_and_output_dropped,
    hint_suffix,
    load_parameters,
    only_match,
    tolerance,
    tr,
)

DIM, N_HEADS, MAX_SEQ_LEN = 16, 4, 32
HEAD_DIM = DIM // N_HEADS
WEIGHTS = ("wq", "wk", "wv", "wo")
FORWARD = N_("the new tokens take positions T_past .. T_past + T - 1 (RoPE turns q and k by those), attend over the "
             "T_past cached keys and their own up to themselves, and the cache comes back with all T_past + T.")
# What a decode matches, where it is one of these and no other (grader.judge.claims.only_match).
CAUSES = {
    "positions": N_("It matches the output when every call's tokens are rotated at positions 0 .. T-1: rotate them at "
                    "T_past .. T_past + T - 1, after the cached ones (torch.arange(T_past, T_past + T))."),
    "top-left": N_("It matches the output when the causal triangle is not shifted by the cached positions: new token t "
                   "sees keys 0 .. T_past + t, torch.ones(T, T_past + T).tril(diagonal=T_past)."),
}


def build(impl, device, *, max_seq_len=MAX_SEQ_LEN, dropout=None, seed=0):
    """The submission's module with random weights (returned too, float32), in eval mode."""
    sizes = {"dim": DIM, "n_heads": N_HEADS, "max_seq_len": max_seq_len, **({} if dropout is None else
                                                                          {"dropout": dropout})}
    module = impl.kv_cache.CachedSelfAttention(impl.config.ModelArgs(**sizes))
    generator = torch.Generator().manual_seed(seed)
    weights = {f"{name}.weight": torch.randn(DIM, DIM, generator=generator) / math.sqrt(DIM) for name in WEIGHTS}
    load_parameters(module, weights, name="CachedSelfAttention", names_hint=tr("call the layers wq, wk, wv and wo"))
    return module.to(device).eval(), weights


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE on (..., T, head_dim) at `positions`, in x's dtype (float32 tables for float32, as the contract's)."""
    freqs = 10000.0 ** (-torch.arange(0, x.size(-1), 2, dtype=torch.float64) / x.size(-1))
    angles = (positions.double()[:, None] * freqs[None, :]).to(x.dtype)
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def decode(x: torch.Tensor, weights: dict, schedule: list[int], mode: str = "right", dtype=torch.float64):
    """Causal self-attention with RoPE, decoded call by call (`schedule`: the tokens of each call), in `dtype`.

    mode "positions": each call's tokens rotated at 0 .. T-1; "top-left": the causal triangle not shifted."""
    x = x.detach().cpu().to(dtype)
    w = {name: weights[f"{name}.weight"].to(dtype) for name in WEIGHTS}
    B, T, _ = x.shape
    q, k, v = ((x @ w[name].T).view(B, T, N_HEADS, HEAD_DIM).transpose(1, 2) for name in ("wq", "wk", "wv"))
    outs, keys, values, start = [], None, None, 0
    for size in schedule:
        new = slice(start, start + size)
        positions = torch.arange(size) if mode == "positions" else torch.arange(start, start + size)
        k_new = rotate(k[:, :, new], positions)
        keys = k_new if keys is None else torch.cat((keys, k_new), dim=2)
        values = v[:, :, new] if values is None else torch.cat((values, v[:, :, new]), dim=2)
        keep = torch.ones(size, start + size, dtype=torch.bool).tril(diagonal=0 if mode == "top-left" else start)
        scores = rotate(q[:, :, new], positions) @ keys.transpose(-2, -1) / math.sqrt(HEAD_DIM)
        weights_ = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        outs.append((weights_ @ values).transpose(1, 2).reshape(B, size, DIM) @ w["wo"].T)
        start += size
    return torch.cat(outs, dim=1), (keys, values)


def call(module, x, cache=None, *, what):
    """module(x, cache) -> (out, cache) as tensors, with the forward's hint where it raises."""
    try:
        out, new_cache = expect_tuple(module(x, cache), 2, name=what)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(FORWARD))) from None
    new_cache = expect_tuple(new_cache, 2, name=tr("the cache {what} returns", what=what))
    return expect_tensor(out, name=what), tuple(expect_tensor(t, name="cache") for t in new_cache)


def run(module, x, schedule):
    """Decode x call by call, passing each call's cache to the next: the outputs side by side, and the last cache."""
    outs, cache, start = [], None, 0
    for size in schedule:
        out, cache = call(module, x[:, start:start + size], cache,
                          what=tr("the call on tokens {first} to {last}", first=start, last=start + size - 1))
        outs.append(out)
        start += size
    return torch.cat(outs, dim=1), cache


def check_decode(module, weights, x, schedule, *, name, dtype=torch.float32):
    got, _ = run(module, x, schedule)
    want = decode(x, weights, schedule)[0]
    atol = tolerance(decode(x, weights, schedule, dtype=torch.float32)[0], want)
    if tuple(got.shape) == tuple(want.shape) and not bool(((got.double().cpu() - want).abs() <= atol).all()):
        causes = {cause: decode(x, weights, schedule, mode=cause)[0] for cause in CAUSES}
        cause = only_match(got, causes, atol=atol)
        assert_close(got, want.to(dtype), atol=atol, name=name, hint=CAUSES[cause] if cause else FORWARD)
    assert_close(got, want.to(dtype), atol=atol, name=name, hint=FORWARD)


@pytest.mark.points(2)
def test_one_call_on_the_whole_sequence_is_causal_attention_with_rope(impl, device, seed):
    module, weights = build(impl, device, seed=seed)
    x = torch.randn(2, 9, DIM, device=device)
    check_decode(module, weights, x, [9], name="CachedSelfAttention(x) for x of shape (2, 9, 16), no cache")


@pytest.mark.hint_after("test_one_call_on_the_whole_sequence_is_causal_attention_with_rope")
@pytest.mark.points(3)
def test_decoding_token_by_token_gives_the_outputs_of_one_call(impl, device, seed):
    module, weights = build(impl, device, seed=seed)
    x = torch.randn(2, 12, DIM, device=device)
    check_decode(module, weights, x, [4] + [1] * 8,
                 name=tr("the outputs of a prefill of 4 tokens then 8 steps of one, side by side"))


@pytest.mark.hint_after("test_decoding_token_by_token_gives_the_outputs_of_one_call")
@pytest.mark.points(2)
def test_prefill_then_a_chunk_of_several_tokens(impl, device, seed):
    module, weights = build(impl, device, seed=seed)
    x = torch.randn(1, 10, DIM, device=device)
    check_decode(module, weights, x, [5, 4, 1],
                 name=tr("the outputs of a prefill of 5 tokens, a chunk of 4, then one, side by side"))


@pytest.mark.hint_after("test_one_call_on_the_whole_sequence_is_causal_attention_with_rope")
@pytest.mark.points(2)
def test_the_cache_grows_by_one_per_step_and_holds_the_rotated_keys_and_values(impl, device, seed):
    module, weights = build(impl, device, seed=seed)
    x = torch.randn(2, 7, DIM, device=device)
    cache = None
    for t, size in enumerate([5, 1, 1]):
        start = 0 if t == 0 else 4 + t
        _, cache = call(module, x[:, start:start + size], cache, what="CachedSelfAttention(x, cache)")
        seen = start + size
        for name, entry in zip(("k", "v"), cache, strict=True):
            expected = (2, N_HEADS, seen, HEAD_DIM)
            assert tuple(entry.shape) == expected, (
                tr("after {seen} positions the cache's {name} has shape {shape}, expected {expected} = (B, n_heads, "
                   "T_past + T, head_dim).", seen=seen, name=name, shape=tuple(entry.shape), expected=expected)
                + hint_suffix(tr("append the new keys and values along dim 2, the positions: torch.cat((cache_k, k), "
                                 "dim=2), with k as (B, n_heads, T, head_dim).")))
    _, (keys, values) = decode(x, weights, [7])
    atol = tolerance(decode(x, weights, [7], dtype=torch.float32)[1][0], keys)
    assert_close(cache[0], keys.float(), atol=atol, name=tr("the cached keys after 7 positions"),
                 hint="the cache holds the keys after RoPE, each rotated once at its own position: cache them after "
                      "self.rope, then use them as they are.")
    assert_close(cache[1], values.float(), atol=atol, name=tr("the cached values after 7 positions"),
                 hint="the cache holds the values wv(x), split into heads (B, n_heads, T, head_dim), unrotated.")


@pytest.mark.points(1)
def test_past_max_seq_len_is_refused_with_a_value_error(impl, device, seed):
    module, _ = build(impl, device, max_seq_len=8, seed=seed)
    x = torch.randn(1, 9, DIM, device=device)
    _, cache = call(module, x[:, :6], None, what="CachedSelfAttention(x) for 6 tokens, max_seq_len 8")
    for what, args in ((N_("3 tokens after 6 cached, max_seq_len 8"), (x[:, 6:9], cache)),
                       (N_("9 tokens, no cache, max_seq_len 8"), (x, None))):
        try:
            module(*args)
        except SubmissionFailure as failure:
            assert failure.kind == "ValueError", (
                tr("for {what} expected ValueError, got: {failure}", what=tr(what), failure=failure)
                + hint_suffix(tr("check T_past + T > max_seq_len before anything else and raise ValueError: past the "
                                 "RoPE tables there is no angle.")))
        else:
            raise AssertionError(tr("for {what} the call returned without complaint: the positions pass "
                                    "max_seq_len.", what=tr(what))
                                 + hint_suffix(tr("raise ValueError when T_past + T > max_seq_len.")))


@pytest.mark.confirmed_by("test_one_call_on_the_whole_sequence_is_causal_attention_with_rope")
@pytest.mark.points(1)
def test_layers_rope_and_dropouts_have_the_contract_names(impl):
    module = impl.kv_cache.CachedSelfAttention(impl.config.ModelArgs(dim=DIM, n_heads=N_HEADS,
                                                                     max_seq_len=MAX_SEQ_LEN))
    info = describe(module)
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {f"{name}.weight": [DIM, DIM] for name in WEIGHTS}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module="CachedSelfAttention", got=got,
           expected=expected)
        + hint_suffix(tr("wq, wk, wv, wo = nn.Linear(dim, dim, bias=False).")))
    assert (module.n_heads, module.head_dim) == (N_HEADS, HEAD_DIM), tr(
        "n_heads, head_dim are {n_heads}, {head_dim}; expected {want_heads}, {want_dim} = dim // n_heads",
        n_heads=module.n_heads, head_dim=module.head_dim, want_heads=N_HEADS, want_dim=HEAD_DIM)
    rope = {name: tuple(b["shape"]) for name, b in info.buffers.items() if name.startswith("rope.")}
    assert info.is_a("rope", "RotaryEmbedding") and rope.get("rope.cos") == (MAX_SEQ_LEN, HEAD_DIM // 2), (
        tr("rope is {kind} with buffers {buffers}, expected your RotaryEmbedding(head_dim, max_seq_len), its cos and "
           "sin of shape {shape}.", kind=info.kind_of("rope"), buffers=rope, shape=(MAX_SEQ_LEN, HEAD_DIM // 2))
        + hint_suffix(tr("self.rope = RotaryEmbedding(self.head_dim, args.max_seq_len), from rope.py.")))
    for name in ("attn_dropout", "resid_dropout"):
        assert info.is_a(name, "Dropout"), tr("{name} is {kind}, expected nn.Dropout(args.dropout).", name=name,
                                              kind=info.kind_of(name))


@pytest.mark.hint_after("test_one_call_on_the_whole_sequence_is_causal_attention_with_rope")
@pytest.mark.points(1)
def test_dropout_acts_in_training_mode_only(impl, device, seed):
    module, weights = build(impl, device, dropout=0.5, seed=seed)
    x = torch.randn(2, 6, DIM, device=device)
    check_decode(module, weights, x, [3, 1, 2], name=tr("the outputs in eval mode of a module built with dropout=0.5"))
    module.train()
    first, _ = call(module, x, None, what="CachedSelfAttention(x) in training mode")
    second, _ = call(module, x, None, what="CachedSelfAttention(x) in training mode")
    assert not torch.allclose(first, second), (
        tr("with dropout=0.5 in training mode two calls on the same input gave the same output.")
        + hint_suffix(tr("self.attn_dropout and self.resid_dropout = nn.Dropout(args.dropout), the first on the "
                         "attention weights, the second on the output of wo.")))
    plain, _ = build(impl, device, seed=seed)
    plain.train()
    out, _ = call(plain, x, None, what="CachedSelfAttention(x) in training mode, built without dropout")
    assert_close(out, decode(x, weights, [6])[0].float(), atol=1e-5, name="the output in training mode of a module "
                 "built without a dropout argument", hint="ModelArgs' dropout is 0.0 by default: nothing is dropped.")


@pytest.mark.hint_after("test_one_call_on_the_whole_sequence_is_causal_attention_with_rope")
@pytest.mark.points(1)
def test_dropout_drops_the_attention_weights_and_the_output_of_wo(impl, device, seed):
    module, weights = build(impl, device, dropout=0.5, seed=seed)
    module.train()
    x = torch.randn(4, 8, DIM, device=device)
    out, _ = call(module, x, None, what="CachedSelfAttention(x) in training mode")
    expect_weights_and_output_dropped(out, decode(x, weights, [8])[0],
                                      decode(x, weights, [8], dtype=torch.float32)[0])
