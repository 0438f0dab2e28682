"""Public tests for exercises/attention.py: shapes, properties, and the course notes' worked example.

Run them with `grader check attention`. They need no reference solution: every expected value is
either a property any correct attention has, a number printed in the course notes, or the notes' formula
computed here in float64 (the tolerance is how far the same formula lands from it in float32).
"""

import math

import pytest
import torch

from grader.testing import N_, assert_close, expect_tuple, hint_suffix, tolerance, tr

# Five 4-dimensional tokens from the course notes; with q = k = v = TOKENS the weights are printed there.
TOKENS = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0.5, 0.5, 0]]
FIRST_ROW = [0.2976, 0.1095, 0.1805, 0.1805, 0.2318]
LAST_ROW = [0.2374, 0.1440, 0.2374, 0.1440, 0.2374]


def inputs(device, *, batch=2, queries=12, keys=16, d_k=8, d_v=5):
    q = torch.randn(batch, queries, d_k, device=device)
    k = torch.randn(batch, keys, d_k, device=device)
    v = torch.randn(batch, keys, d_v, device=device)
    return q, k, v


def by_hand(q, k, v):
    """The course notes' attention: softmax(q k^T / sqrt(d_k)) over the keys, and its weighted sum of the values."""
    p_attn = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)
    return p_attn @ v, p_attn


def check(impl, q, k, v, *, hint):
    """The submission's (output, p_attn) against the formula in float64, within the formula's own float32 error."""
    expected_out, expected_p = by_hand(q.double(), k.double(), v.double())
    near_out, near_p = by_hand(q, k, v)
    output, p_attn = expect_tuple(impl.attention.attention(q, k, v), 2, name="attention()")
    assert_close(p_attn, expected_p.to(q.dtype), atol=tolerance(near_p, expected_p), name="p_attn", hint=hint)
    assert_close(output, expected_out.to(q.dtype), atol=tolerance(near_out, expected_out), name="output", hint=hint)


@pytest.mark.points(2)
def test_returns_output_and_weights_with_the_right_shapes(impl, device, seed):
    q, k, v = inputs(device)
    output, p_attn = expect_tuple(impl.attention.attention(q, k, v), 2, name="attention()")
    assert isinstance(output, torch.Tensor) and isinstance(p_attn, torch.Tensor), tr(
        "return (output, p_attn), two tensors")
    assert tuple(output.shape) == (2, 12, 5), (
        tr("output has shape {shape}, expected (2, 12, 5) = (batch, L_q, d_v).", shape=tuple(output.shape))
        + hint_suffix(tr("return (p_attn @ value, p_attn) in that order."))
    )
    assert tuple(p_attn.shape) == (2, 12, 16), tr(
        "p_attn has shape {shape}, expected (2, 12, 16) = (batch, L_q, L_k)", shape=tuple(p_attn.shape))


@pytest.mark.points(2)
def test_each_querys_weights_are_positive_and_sum_to_one(impl, device, seed):
    q, k, v = inputs(device)
    _, p_attn = expect_tuple(impl.attention.attention(q, k, v), 2, name="attention()")
    assert bool((p_attn >= 0).all()), tr("p_attn has negative weights: apply softmax to the scores")
    sums = p_attn.sum(dim=-1)
    assert_close(sums, torch.ones(2, 12, device=device), atol=1e-5, name="p_attn.sum(dim=-1)",
                 hint=row_sums_hint(q, k, p_attn, sums))


def row_sums_hint(q, k, p_attn, sums) -> str:
    """What rows that do not sum to 1 show. Rows that all sum to one other number were each normalised, then scaled
    (or never came from a softmax): told that the softmax runs over the wrong dim, the student would look in the wrong
    place. Weights that are the formula's softmax times that number say more: only what follows the softmax is wrong.
    Anything else gets the rule."""
    total = float(sums.mean())
    if not (math.isfinite(total) and total > 0 and float(sums.max() - sums.min()) <= 1e-5 * total):
        return tr("softmax must run over the last dim (the keys), so that each query's row sums to 1.")
    _, expected_p = by_hand(q.double(), k.double(), k.double())  # the weights only: any values with L_k rows
    if bool(((p_attn.double() - expected_p * total).abs() <= 1e-5 * total).all()):
        return tr("every query's row sums to {total}: the weights are the softmax over the keys times {total}. "
                  "p_attn is the softmax itself: each row divided by its own sum, and nothing applied after.",
                  total=format(total, ".6g"))
    return tr("every query's row sums to the same {total}, not 1: p_attn must be a softmax over the keys, each row "
              "divided by its own sum, with nothing applied after it.", total=format(total, ".6g"))


@pytest.mark.points(3)
def test_course_notes_worked_example(impl, device):
    x = torch.tensor(TOKENS, device=device)
    _, p_attn = expect_tuple(impl.attention.attention(x, x, x), 2, name="attention()")
    hint = N_("the scores are q @ k^T / sqrt(d_k) with d_k = 4, then softmax over each row.")
    assert_close(p_attn[..., 0, :], torch.tensor(FIRST_ROW, device=device), atol=6e-5,
                 name="first row of p_attn", hint=hint)
    assert_close(p_attn[..., -1, :], torch.tensor(LAST_ROW, device=device), atol=6e-5,
                 name="last row of p_attn", hint=hint)


@pytest.mark.points(1)
def test_output_is_the_weighted_sum_of_values(impl, device, seed):
    q, k, v = inputs(device)
    output, p_attn = expect_tuple(impl.attention.attention(q, k, v), 2, name="attention()")
    assert_close(p_attn.sum(dim=-1), torch.ones(2, 12, device=device), atol=1e-5, name="p_attn.sum(dim=-1)",
                 hint="first make p_attn a softmax over the keys.")
    assert_close(output, p_attn @ v, atol=1e-5, name="output", hint="output = p_attn @ value.")


@pytest.mark.points(2)
@pytest.mark.hint_after("test_each_querys_weights_are_positive_and_sum_to_one")  # the mask's hint assumes a softmax
def test_blocked_keys_get_zero_weight(impl, device, seed):
    q, k, v = inputs(device)
    mask = torch.ones(12, 16, dtype=torch.bool, device=device)
    mask[:, 10:] = False  # the last six keys are blocked for every query
    _, p_attn = expect_tuple(impl.attention.attention(q, k, v, mask=mask), 2, name="attention()")
    assert_close(p_attn[..., 10:], torch.zeros(2, 12, 6, device=device), atol=0.0, name="weights of blocked keys",
                 hint="mask is a keep mask: set scores where mask == 0 to -inf before the softmax.")
    assert_close(p_attn.sum(dim=-1), torch.ones(2, 12, device=device), atol=1e-5, name="p_attn.sum(dim=-1)",
                 hint="mask before the softmax, so the remaining weights still sum to 1.")


@pytest.mark.hint_after("test_course_notes_worked_example")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_scales_by_sqrt_of_key_width_not_value_width(impl, device, seed):
    check(impl, *inputs(device, d_k=16, d_v=4), hint="divide by sqrt(d_k), the width of query and key.")


@pytest.mark.hint_after("test_course_notes_worked_example")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, device, seed):
    check(impl, *(t.double() for t in inputs(device)),
          hint="in float64: if only this test fails, look for a hard-coded float32 (.float(), dtype=torch.float32).")


@pytest.mark.points(1)
def test_real_dropout_in_training_mode_drops_weights(impl, device, seed):
    q, k, v = inputs(device, batch=4, queries=16, keys=32)
    dropout = impl.torch.nn.Dropout(0.5)
    output, p_attn = expect_tuple(impl.attention.attention(q, k, v, dropout=dropout), 2, name="attention()")
    zeros = float((p_attn == 0).double().mean())
    assert 0.3 < zeros < 0.7, (
        tr("with nn.Dropout(0.5), {share} of the returned weights are 0, expected about half.",
           share=format(zeros, ".0%"))
        + hint_suffix(tr("dropout acts on p_attn after the softmax, and attention returns p_attn as dropout left it."))
    )
    assert_close(output, p_attn @ v, atol=1e-5, name="output",
                 hint="the output must use the same dropped weights you return.")


@pytest.mark.hint_after("test_course_notes_worked_example")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_large_scores_give_no_nan(impl, device, seed):
    """Scores near 500, about 1 apart: exp() of them overflows float32, a softmax that subtracts the row max does not.
    Each key picks one coordinate of the queries (the scores are the queries themselves), so the gaps, not the draw,
    decide how soft the weights are: they stay soft, and the scale counts here on every draw, as in the other tests
    (scores of 100 times standard draws were saturated on most draws, and judged the scale only on some)."""
    q = 500.0 + torch.randn(2, 12, 8, device=device)
    k = torch.eye(8, device=device).repeat(2, 1, 1)
    v = torch.randn(2, 8, 5, device=device)
    check(impl, q, k, v, hint="use torch.softmax (it subtracts the row max); exp() of large scores overflows to inf.")
