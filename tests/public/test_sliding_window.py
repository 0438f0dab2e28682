"""Public tests for exercises/sliding_window.py: the window's mask, masks composed, empty rows, the rolling cache.

Run them with `grader check sliding_window`. They need no reference solution: the expected masks are the
contract's rule written with loops, attention is the float64 formula, a value matrix of one-hot rows makes the
output show the attention weights themselves, and the cache is judged on keys that carry their own position.
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    expect_tensor,
    expect_tuple,
    hint_suffix,
    tolerance,
    tr,
)


def window_by_hand(T, window):
    return torch.tensor([[j <= i and i - j < window for j in range(T)] for i in range(T)])


def rows(mask):
    return [[j for j in range(mask.shape[-1]) if mask[i, j]] for i in range(mask.shape[0])]


@pytest.mark.points(2)
@pytest.mark.parametrize("T, window", [(7, 3), (5, 1), (4, 6)], ids=["T 7, window 3", "window 1", "window > T"])
def test_window_keeps_the_last_w_positions_and_no_future(impl, T, window):
    got = expect_tensor(impl.sliding_window.sliding_window_mask(T, window), name="sliding_window_mask")
    assert tuple(got.shape) == (T, T) and got.dtype == torch.bool, tr(
        "sliding_window_mask({T}, {window}) is {dtype} of shape {shape}, expected bool of shape {expected}.",
        T=T, window=window, dtype=str(got.dtype).removeprefix("torch."), shape=tuple(got.shape), expected=(T, T))
    want = window_by_hand(T, window)
    if not torch.equal(got, want):
        i = int(torch.nonzero((got != want).any(dim=1))[0])
        kept = rows(got)[i]
        if any(j > i for j in kept):
            hint = N_("a query never sees a later key: keep j <= i as well as i - j < window.")
        elif len(kept) == min(i + 1, window + 1) and window < i + 1:
            hint = N_("that is window + 1 keys: i - j < window keeps the query itself and the window - 1 before it.")
        else:
            hint = N_("key j is kept for query i when j <= i and i - j < window.")
        raise AssertionError(
            tr("sliding_window_mask({T}, {window}): query {i} keeps keys {got}, expected {want}.", T=T, window=window,
               i=i, got=kept, want=rows(want)[i])
            + hint_suffix(tr(hint)))


def padding_of(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T): True for the real tokens


@pytest.mark.points(2)
@pytest.mark.parametrize("T_q, T_k", [(6, 6), (3, 6)], ids=["square", "3 queries, 6 keys"])
def test_combined_mask_keeps_where_both_keep(impl, seed, T_q, T_k):
    keep = torch.rand(T_q, T_k) < 0.7
    key_padding = padding_of([T_k, 4], T_k)  # batch element 1: keys 4 and 5 are padding
    got = expect_tensor(impl.sliding_window.combine_masks(keep, key_padding), name="combine_masks")
    expected = (2, 1, T_q, T_k)
    assert tuple(got.shape) == expected, (
        tr("combine_masks gave shape {shape}, expected {expected} = (B, 1, T_q, T_k).", shape=tuple(got.shape),
           expected=expected)
        + hint_suffix(tr("keep[None, None] is (1, 1, T_q, T_k) and key_padding[:, None, None, :] is (B, 1, 1, T_k): "
                         "they broadcast to (B, 1, T_q, T_k).")))
    want = keep[None, None] & key_padding[:, None, None, :]
    if not torch.equal(got.bool(), want):
        b, _, i, j = (int(n) for n in torch.nonzero(got.bool() != want)[0])
        raise AssertionError(
            tr("combine_masks: batch element {b}, query {i}, key {j} is {got}, expected {want} (keep {keep}, key "
               "{j} is {what}).", b=b, i=i, j=j, got=bool(got[b, 0, i, j]), want=bool(want[b, 0, i, j]),
               keep=bool(keep[i, j]), what=tr("a real token") if key_padding[b, j] else tr("padding"))
            + hint_suffix(tr("key_padding says which keys are padding: it runs along the keys, "
                             "key_padding[:, None, None, :], never along the queries.")))


def attention_by_hand(q, k, v, keep, dtype):
    scores = (q.to(dtype) @ k.to(dtype).transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(keep == 0, float("-inf"))
    return scores.softmax(dim=-1) @ v.to(dtype)


def keep_with_a_key_per_row(*shape):
    keep = torch.rand(*shape) < 0.6
    keep[..., 0] = True
    return keep


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_masked_attention_matches_the_formula(impl, device, seed, dtype):
    q, k, v = (torch.randn(2, 3, T, 8, device=device, dtype=dtype) for T in (5, 7, 7))
    keep = keep_with_a_key_per_row(2, 1, 5, 7).to(device)
    want = attention_by_hand(q, k, v, keep, torch.float64)
    got = expect_tensor(impl.sliding_window.masked_attention(q, k, v, keep), name="masked_attention output")
    assert got.dtype == dtype, tr("masked_attention returned {got} for {dtype} inputs.", got=str(got.dtype),
                                  dtype=str(dtype))
    assert_close(got, want.to(dtype), atol=tolerance(attention_by_hand(q, k, v, keep, torch.float32), want),
                 name="masked_attention output", hint="softmax(q @ k.transpose(-2, -1) / sqrt(d)) @ v, with the "
                                                      "blocked scores set to -inf before the softmax.")


@pytest.mark.hint_after("test_masked_attention_matches_the_formula")
@pytest.mark.points(2)
def test_a_query_with_no_key_gets_zeros_never_nan(impl, device, seed):
    T = 5
    q, k = torch.randn(2, T, 4, device=device), torch.randn(2, T, 4, device=device)
    v = torch.eye(T, device=device).repeat(2, 1, 1)  # one-hot values: the output rows are the attention weights
    keep = keep_with_a_key_per_row(2, T, T).to(device)
    keep[1, 2] = False  # query 2 of batch element 1 may see no key
    weights = expect_tensor(impl.sliding_window.masked_attention(q, k, v, keep), name="masked_attention output")
    row = weights[1, 2]
    if bool(row.isnan().any()):
        raise AssertionError(
            tr("the query whose every key is blocked got NaN.")
            + hint_suffix(tr("softmax of a row of -inf is 0/0: find the rows with no kept key "
                             "(keep.any(dim=-1, keepdim=True)), give them finite scores, and set their weights to 0.")))
    if torch.allclose(row, torch.full_like(row, 1 / T), atol=1e-6):
        raise AssertionError(
            tr("the query whose every key is blocked got weight {w} on each of its {T} blocked keys: an average of "
               "values it may not see, where zeros are expected.", w=format(1 / T, ".3g"), T=T)
            + hint_suffix(tr("a -1e9 fill keeps the softmax finite but makes a fully blocked row uniform: set the "
                             "weights of rows with no kept key to 0.")))
    assert_close(row, torch.zeros(T, device=device), atol=1e-6, name="output of the query that may see no key",
                 hint="a query with no kept key gets zeros.")
    others = keep.clone()
    others[1, 2] = True  # the other rows are ordinary attention
    want = attention_by_hand(q, k, v, others, torch.float64)
    assert_close(weights[0], want[0].float(), atol=1e-5, name="outputs of the other queries",
                 hint="only the rows with no kept key are special.")


@pytest.mark.hint_after("test_a_query_with_no_key_gets_zeros_never_nan")
@pytest.mark.points(1)
def test_an_empty_row_has_finite_and_zero_gradients(impl, device, seed):
    T = 4
    q, k, v = (torch.randn(1, T, 4, device=device, requires_grad=True) for _ in range(3))
    keep = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    keep[1] = False  # query 1 may see no key
    grads = backward(impl.sliding_window.masked_attention, q, k, v, keep,
                     grad_output=torch.randn(1, T, 4, device=device))
    for name, grad in zip("qkv", grads.inputs, strict=True):
        assert grad is not None, tr("no gradient reached the input {name}: do not detach it", name=name)
        assert bool(torch.isfinite(grad).all()), (
            tr("the gradient of {name} holds NaN or inf: the row with no kept key poisons backward.", name=name)
            + hint_suffix(tr("keep the softmax's input finite on that row (a finite fill, then zero weights): "
                             "softmax's backward through 0/0 is NaN even where the output was replaced.")))
    assert_close(grads.inputs[0][0, 1], torch.zeros(4, device=device), atol=0.0,
                 name="gradient of the query that may see no key", hint="its output is 0 whatever it is: so is its "
                                                                        "gradient.")


def positions(start, count, device):
    """Keys (1, 2, count, 3) whose every feature is their position, values the same negated."""
    k = torch.arange(start, start + count, device=device, dtype=torch.float32).view(1, 1, count, 1)
    k = k.repeat(1, 2, 1, 3)  # (1, 2, count, 3)
    return k, -k


CHUNKS = {"one token at a time": [1] * 7, "a prompt of 4, then tokens": [4, 1, 1, 1], "longer than the window": [6, 2]}


@pytest.mark.points(2)
@pytest.mark.parametrize("chunks", CHUNKS.values(), ids=CHUNKS.keys())
def test_rolling_cache_returns_the_last_window_positions(impl, device, chunks):
    window, seen = 3, 0
    cache = impl.sliding_window.RollingKVCache(window)
    for count in chunks:
        k, v = positions(seen, count, device)
        try:
            got_k, got_v = expect_tuple(cache.update(k, v), 2, name="RollingKVCache.update")
        except SubmissionFailure as failure:
            raise type(failure)(str(failure) + hint_suffix(tr("update(k, v) returns the pair (k, v)."))) from None
        seen += count
        want = list(range(max(0, seen - window), seen))
        got_k, got_v = expect_tensor(got_k, name="keys returned"), expect_tensor(got_v, name="values returned")
        if tuple(got_k.shape[:2]) != (1, 2) or tuple(got_k.shape[3:]) != (3,):
            raise AssertionError(tr("update returned keys of shape {shape} for keys of shape (1, 2, T, 3): append and "
                                    "keep along dim 2.", shape=tuple(got_k.shape)))
        got = [int(p) for p in got_k[0, 0, :, 0].tolist()]
        if got != want:
            hint = (N_("a rolling cache holds at most window positions: keep the last window along dim 2, "
                       "[:, :, -window:].") if len(got) > window
                    else N_("the newest positions are the ones a query needs: drop the oldest, keep [:, :, -window:].")
                    if len(got) == len(want) else N_("append the new keys after the old ones (torch.cat on dim 2), "
                                                     "then keep the last window."))
            raise AssertionError(
                tr("after {seen} positions with window {window}, update returned the keys of positions {got}, "
                   "expected {want}.", seen=seen, window=window, got=got, want=want)
                + hint_suffix(tr(hint)))
        assert_close(got_v, -got_k, atol=0.0, name="values returned",
                     hint="the values follow the keys: the same positions, appended and dropped alike.")
