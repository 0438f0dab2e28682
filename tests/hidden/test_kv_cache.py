"""Hidden tests for exercises/kv_cache.py: 32 cached steps, random schedules in float64, the cache, the limit.

The golden is causal attention with RoPE in float64 on the module's weights, the whole sequence at once: a cached
decode computes the same rows. Each tolerance comes from the same computation in float32 (float32 RoPE tables make
float32 accuracy the measure of a float64 run too).
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    expect_tensor,
    expect_tuple,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
)

DIM, N_HEADS = 16, 4
HEAD_DIM = DIM // N_HEADS
WEIGHTS = ("wq", "wk", "wv", "wo")
FORWARD = N_("the new tokens take positions T_past .. T_past + T - 1 (RoPE turns q and k by those), attend over the "
             "T_past cached keys and their own up to themselves, and the cache comes back with all T_past + T.")


def build(impl, device, max_seq_len, seed, dtype=torch.float32):
    module = impl.kv_cache.CachedSelfAttention(impl.config.ModelArgs(dim=DIM, n_heads=N_HEADS, max_seq_len=max_seq_len))
    generator = torch.Generator().manual_seed(seed)
    weights = {f"{name}.weight": torch.randn(DIM, DIM, generator=generator) / math.sqrt(DIM) for name in WEIGHTS}
    load_parameters(module, weights, name="CachedSelfAttention", names_hint=tr("call the layers wq, wk, wv and wo"))
    return module.to(device, dtype).eval(), weights


def causal_rope_attention(x: torch.Tensor, weights: dict, dtype: torch.dtype):
    """The whole sequence at once in `dtype`: (output (B, T, dim), rotated keys, values), keys and values as cached."""
    x = x.detach().cpu().to(dtype)
    w = {name: weights[f"{name}.weight"].to(dtype) for name in WEIGHTS}
    B, T, _ = x.shape
    q, k, v = ((x @ w[name].T).view(B, T, N_HEADS, HEAD_DIM).transpose(1, 2) for name in ("wq", "wk", "wv"))
    freqs = 10000.0 ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    angles = (torch.arange(T, dtype=torch.float64)[:, None] * freqs).to(dtype)

    def rotate(t):
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), -1).flatten(-2)

    q, k = rotate(q), rotate(k)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM)).masked_fill(
        ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, DIM) @ w["wo"].T
    return out, k, v


def decode(module, x, schedule):
    outs, cache, start = [], None, 0
    for size in schedule:
        try:
            out, cache = expect_tuple(module(x[:, start:start + size], cache), 2, name="CachedSelfAttention(x, cache)")
        except SubmissionFailure as failure:
            raise type(failure)(str(failure) + hint_suffix(tr(FORWARD))) from None
        outs.append(expect_tensor(out, name="CachedSelfAttention(x, cache)"))
        cache = expect_tuple(cache, 2, name="cache")
        start += size
    return torch.cat(outs, dim=1), cache


@pytest.mark.points(3)
def test_32_cached_steps_give_the_outputs_of_the_whole_sequence(impl, device, seed):
    module, weights = build(impl, device, 40, seed)
    x = torch.randn(3, 36, DIM, device=device)
    got, (keys, values) = decode(module, x, [4] + [1] * 32)
    want, k64, v64 = causal_rope_attention(x, weights, torch.float64)
    ref32, k32, _ = causal_rope_attention(x, weights, torch.float32)
    assert_close(got, want.float(), atol=tolerance(ref32, want), hint=FORWARD,
                 name=tr("the outputs of a prefill of 4 tokens then 32 steps of one, side by side"))
    for name, entry, expected in (("k", keys, k64), ("v", values, v64)):
        assert_close(entry, expected.float(), atol=tolerance(k32, k64),
                     name=tr("the cache's {name} after 36 positions", name=name),
                     hint="the cache holds all T_past + T keys (after RoPE) and values, (B, n_heads, T, head_dim).")


@pytest.mark.points(2)
def test_random_schedules_in_float64(impl, device, seed):
    generator = torch.Generator().manual_seed(seed)
    module, weights = build(impl, device, 24, seed, dtype=torch.float64)
    for _ in range(3):
        sizes = []
        while sum(sizes) < 20:
            sizes.append(int(torch.randint(1, 6, (1,), generator=generator)))
        sizes[-1] -= sum(sizes) - 20
        x = torch.randn(1, 20, DIM, generator=generator, dtype=torch.float64).to(device)
        got, _ = decode(module, x, sizes)
        want, _, _ = causal_rope_attention(x, weights, torch.float64)
        assert_close(got, want, atol=tolerance(causal_rope_attention(x, weights, torch.float32)[0], want), hint=FORWARD,
                     name=tr("the float64 outputs of calls of {sizes} tokens, side by side", sizes=sizes))


@pytest.mark.points(1)
def test_a_sequence_of_exactly_max_seq_len_is_accepted(impl, device, seed):
    module, weights = build(impl, device, 8, seed)
    x = torch.randn(2, 8, DIM, device=device)
    got, _ = decode(module, x, [5, 3])
    want, _, _ = causal_rope_attention(x, weights, torch.float64)
    assert_close(got, want.float(), atol=tolerance(causal_rope_attention(x, weights, torch.float32)[0], want),
                 name=tr("the outputs of 5 then 3 tokens with max_seq_len 8"),
                 hint="T_past + T == max_seq_len is allowed: refuse only T_past + T > max_seq_len.")
    _, cache = decode(module, x[:, :8], [8])
    try:
        module(x[:, :1], cache)
    except SubmissionFailure as failure:
        assert failure.kind == "ValueError", tr("a 9th position with max_seq_len 8 raised {failure}, expected "
                                                "ValueError.", failure=failure)
    else:
        raise AssertionError(tr("a 9th position with max_seq_len 8 was accepted: raise ValueError when T_past + T > "
                                "max_seq_len."))
