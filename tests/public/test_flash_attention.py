"""Public tests for exercises/flash_attention.py: exact attention and its log-sum-exp, over tiles, in bounded memory.

Run them with `grader check flash_attention`. They need no reference solution: the expected values are
softmax(q k^T / sqrt(d)) v and logsumexp(q k^T / sqrt(d)) computed here in float64 (the tolerance is how far
the same formula lands from it in float32). The memory test runs the submission at T = 12288 in a worker
whose memory the host limits to less than one T x T bool mask, and checks a sample of query rows, drawn here,
against the formula computed for those rows only.
"""

import math

import pytest
import torch

from grader.testing import (
    EPS32,
    N_,
    SubmissionFailure,
    assert_close,
    expect_tensor,
    expect_tuple,
    hint_suffix,
    tolerance,
    tr,
)

ONLINE = N_("per query keep m (the running max), l (the sum of exp(s - m)) and acc (the sum of exp(s - m) v); when "
            "a tile brings m_new, multiply both l and acc by exp(m - m_new); divide acc by l once, after the last "
            "tile.")
LSE = N_("lse is the natural log-sum-exp of the scaled scores, log sum_j exp(s_j) = m + log(l): the running max "
         "plus the log of the running sum, with torch.log.")
CAUSAL = N_("key j is kept for query i when j <= i, with i and j the global positions: the tile's offset plus the "
            "index inside it.")

# The memory test: a tile of T x BLOCK float32 is 6 MiB; one T x T bool mask is 144 MiB, float32 scores 576 MiB.
MEMORY_T, MEMORY_D, MEMORY_BLOCK, MEMORY_MIB, SAMPLED_ROWS = 12288, 16, 128, 112, 32


def formula(q, k, v, *, causal=False):
    """softmax(q k^T / sqrt(d)) v and the log-sum-exp of the scaled scores, in q's dtype."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        blocked = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(blocked, float("-inf"))
    return s.softmax(dim=-1) @ v, s.logsumexp(dim=-1)


def rounding(q, k, near, want, *, values=None):
    """The tolerance of a float32 result: the formula's own float32 error (`tolerance`), and no less than what
    rounding a score costs, since correct code may take exp(s - lse) where the formula takes exp(s - max): a few
    EPS32 times the largest score in every weight (times the largest value, for out)."""
    largest = (q.double() @ k.double().transpose(-2, -1)).abs().max().item() / math.sqrt(q.size(-1))
    scale = 1.0 if values is None else max(1.0, values.abs().max().item())
    return max(tolerance(near, want), 4 * EPS32 * largest * scale)


def inputs(device, leading=(2, 3), *, queries=50, keys=70, d=8, dtype=torch.float32):
    q = torch.randn(*leading, queries, d, device=device, dtype=dtype)
    k = torch.randn(*leading, keys, d, device=device, dtype=dtype)
    v = torch.randn(*leading, keys, d, device=device, dtype=dtype)
    return q, k, v


def call(impl, q, k, v, **kwargs):
    """(out, lse) of the submission, each checked to be a tensor."""
    out, lse = expect_tuple(impl.flash_attention.flash_attention(q, k, v, **kwargs), 2, name="flash_attention()")
    return expect_tensor(out, name="out"), expect_tensor(lse, name="lse")


def check(impl, q, k, v, *, causal=False, block_size=16, hint=ONLINE, lse_hint=LSE):
    """The submission's (out, lse) against the formula in float64, within the formula's own float32 error."""
    want_out, want_lse = formula(q.double(), k.double(), v.double(), causal=causal)
    near_out, near_lse = formula(q.float(), k.float(), v.float(), causal=causal)
    out, lse = call(impl, q, k, v, causal=causal, block_size=block_size)
    assert_close(out, want_out.to(q.dtype), atol=rounding(q, k, near_out, want_out, values=v), name="out",
                 hint=hint)
    assert_close(lse, want_lse.to(q.dtype), atol=rounding(q, k, near_lse, want_lse), name="lse", hint=lse_hint)


@pytest.mark.points(1)
def test_returns_out_and_lse_with_the_right_shapes(impl, device, seed):
    q, k, v = inputs(device)
    out, lse = call(impl, q, k, v, block_size=16)
    assert tuple(out.shape) == (2, 3, 50, 8), (
        tr("out has shape {shape}, expected (2, 3, 50, 8) = (..., T_q, d).", shape=tuple(out.shape))
        + hint_suffix(tr("return (out, lse) in that order.")))
    assert tuple(lse.shape) == (2, 3, 50), (
        tr("lse has shape {shape}, expected (2, 3, 50) = (..., T_q): one number per query.", shape=tuple(lse.shape))
        + hint_suffix(tr("keep the running max and sum as (..., T_q) (or squeeze their last dim of 1 at the end).")))


@pytest.mark.points(3)
def test_output_is_softmax_attention_over_many_tiles(impl, device, seed):
    """50 queries and 70 keys in tiles of 16: five key tiles, the last one short; with random keys a later tile
    holds a larger score than the earlier ones for most queries, so the running values must be rescaled."""
    q, k, v = inputs(device)
    want_out, _ = formula(q.double(), k.double(), v.double())
    near_out, _ = formula(q, k, v)
    out, _ = call(impl, q, k, v, block_size=16)
    assert_close(out, want_out.float(), atol=rounding(q, k, near_out, want_out, values=v), name="out", hint=ONLINE)


@pytest.mark.points(2)
@pytest.mark.hint_after("test_output_is_softmax_attention_over_many_tiles")  # its hint assumes the tiles are right
def test_lse_is_the_natural_log_sum_exp_of_the_scaled_scores(impl, device, seed):
    q, k, v = inputs(device)
    _, want_lse = formula(q.double(), k.double(), v.double())
    _, near_lse = formula(q, k, v)
    _, lse = call(impl, q, k, v, block_size=16)
    assert_close(lse, want_lse.float(), atol=rounding(q, k, near_lse, want_lse), name="lse", hint=LSE)


@pytest.mark.points(1)
def test_scores_that_grow_tile_after_tile(impl, device, seed):
    """Keys that grow tile after tile: every query's maximum moves at every tile, the case rescaling exists for."""
    q, k, v = inputs(device, leading=(2,), queries=12, keys=48)
    k = k * torch.linspace(0.2, 3.0, 48, device=device)[:, None]
    q = q.abs()  # positive queries against keys that grow: later scores are larger
    check(impl, q, k, v, block_size=16)


@pytest.mark.points(3)
@pytest.mark.parametrize("block_size", [16, 7], ids=["block_size 16", "block_size 7"])
def test_causal_matches_masked_softmax(impl, device, seed, block_size):
    q, k, v = inputs(device, queries=50, keys=50)
    check(impl, q, k, v, causal=True, block_size=block_size, hint=CAUSAL)


@pytest.mark.points(1)
@pytest.mark.hint_after("test_output_is_softmax_attention_over_many_tiles")  # its hint assumes the tiles are right
@pytest.mark.parametrize("block_size", [1, 5, 70, 128], ids=["block_size 1", "block_size 5", "one tile, 70",
                                                              "block_size 128 > T"])
def test_any_block_size_gives_the_same_result(impl, device, seed, block_size):
    check(impl, *inputs(device, leading=(2,)), block_size=block_size,
          hint=N_("the result must not depend on block_size: the last tile may be shorter (slice with "
                  "[j:j + block_size], which stops at T), and one tile may hold every key."))


@pytest.mark.points(1)
@pytest.mark.hint_after("test_output_is_softmax_attention_over_many_tiles", "test_causal_matches_masked_softmax")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_float64_in_float64_out(impl, device, seed, causal):
    q, k, v = inputs(device, queries=40, keys=40, dtype=torch.float64)
    out, lse = call(impl, q, k, v, causal=causal, block_size=16)
    assert out.dtype == torch.float64 and lse.dtype == torch.float64, (
        tr("float64 inputs gave out in {out} and lse in {lse}, expected float64.", out=out.dtype, lse=lse.dtype)
        + hint_suffix(tr("make the running tensors with dtype=q.dtype (torch.full, torch.zeros_like), never a "
                         "hard-coded float32.")))
    check(impl, q, k, v, causal=causal, block_size=16)


@pytest.mark.points(1)
@pytest.mark.hint_after("test_output_is_softmax_attention_over_many_tiles")  # its hint assumes the tiles are right
def test_large_scores_give_no_nan(impl, device, seed):
    """Scores past 100: exp() of them overflows float32; subtracting the running max does not."""
    q, k, v = inputs(device, leading=(2,), queries=12, keys=40)
    check(impl, q * 8, k * 8, v, block_size=16,
          hint=N_("subtract the running max before exp(): exp(s - m_new), never exp(s) alone, which overflows."))


@pytest.mark.points(1)
def test_causal_needs_as_many_queries_as_keys(impl, device):
    q, k, v = inputs(device, queries=12, keys=16)
    try:
        impl.flash_attention.flash_attention(q, k, v, causal=True, block_size=8)
    except SubmissionFailure as failure:
        assert failure.kind == "ValueError", tr(
            "expected ValueError from flash_attention(causal=True) with 12 queries and 16 keys, got: {failure}",
            failure=failure)
    else:
        raise AssertionError(
            tr("flash_attention(causal=True) with 12 queries and 16 keys returned without complaint.")
            + hint_suffix(tr("raise ValueError when causal is True and T_q != T_k.")))


def rows_by_formula(q, k, v, rows, *, causal):
    """out and lse of the query rows `rows` only, in q's dtype: (len(rows), T) scores, never (T, T)."""
    s = q[..., rows, :] @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., R, T)
    if causal:
        s = s.masked_fill(torch.arange(k.size(-2)) > rows[:, None], float("-inf"))
    return s.softmax(dim=-1) @ v, s.logsumexp(dim=-1)


@pytest.mark.points(4)
@pytest.mark.memory_budget(MEMORY_MIB)
@pytest.mark.call_timeout(60)
def test_causal_memory_stays_in_tiles_at_T_12288(impl, seed):
    """At T = 12288 the worker may hold MEMORY_MIB MiB beyond the sandbox's start: a few T x 128 tiles (6 MiB each
    in float32) fit, one T x T bool mask (144 MiB) does not. Causal, so that a materialised mask fails as the
    scores do (one case: each call takes about half a second). A sample of rows, drawn here, is checked against the
    formula for those rows, so no implementation can pass by telling this call from the others."""
    q, k, v = (torch.randn(1, MEMORY_T, MEMORY_D, device="cpu") for _ in range(3))  # host memory: always the CPU
    rows = torch.randperm(MEMORY_T)[:SAMPLED_ROWS].sort().values
    try:
        out, lse = call(impl, q, k, v, causal=True, block_size=MEMORY_BLOCK)
    except SubmissionFailure as failure:
        if "memory" not in failure.causes:
            raise
        raise SubmissionFailure(str(failure) + hint_suffix(tr(
            "at T = {T} with block_size = {block}, a tile of T x block_size float32 scores is {tile} MiB, and this "
            "test allows {budget} MiB, less than one T x T bool mask ({mask} MiB): something held a (T, T) tensor, "
            "the scores, a mask (torch.ones(T, T), torch.tril), or scores cast to float16. Compute them a tile at "
            "a time.", T=MEMORY_T, block=MEMORY_BLOCK, tile=MEMORY_T * MEMORY_BLOCK * 4 // 2**20, budget=MEMORY_MIB,
            mask=MEMORY_T * MEMORY_T // 2**20))).caused(*failure.causes) from None
    assert tuple(out.shape) == (1, MEMORY_T, MEMORY_D) and tuple(lse.shape) == (1, MEMORY_T), tr(
        "at T = {T}, out has shape {out} and lse {lse}, expected {want_out} and {want_lse}.", T=MEMORY_T,
        out=tuple(out.shape), lse=tuple(lse.shape), want_out=(1, MEMORY_T, MEMORY_D), want_lse=(1, MEMORY_T))
    want_out, want_lse = rows_by_formula(q.double(), k.double(), v.double(), rows, causal=True)
    near_out, near_lse = rows_by_formula(q, k, v, rows, causal=True)
    where = tr("sampled rows of {name} at T = {T}", name="out", T=MEMORY_T)
    assert_close(out[..., rows, :], want_out.float(), atol=rounding(q[..., rows, :], k, near_out, want_out, values=v),
                 name=where,
                 hint=CAUSAL)
    assert_close(lse[..., rows], want_lse.float(), atol=rounding(q[..., rows, :], k, near_lse, want_lse),
                 name=tr("sampled rows of {name} at T = {T}", name="lse", T=MEMORY_T), hint=LSE)
