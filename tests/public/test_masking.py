"""Public tests for exercises/masking.py: shapes, small known answers, and the causal property.

Run them with `grader check masking`. They need no reference solution: every expected value is a
number you can check by hand or a property any correct causal mask has.
"""

import pytest
import torch

from grader.testing import assert_close, expect_tensor, hint_suffix, tr


@pytest.mark.points(1)
def test_causal_average_keeps_the_shape(impl, device, seed):
    x = torch.randn(2, 7, 5, device=device)
    out = expect_tensor(impl.masking.causal_average(x), name="causal_average(x)")
    if tuple(out.shape) != (2, 7, 5):
        raise AssertionError(
            tr("causal_average(x) has shape {shape} for x of shape (2, 7, 5), expected (2, 7, 5) = (B, T, C).",
               shape=tuple(out.shape))
            + hint_suffix(tr("(T, T) weights @ x (B, T, C) gives (B, T, C)."))
        )


@pytest.mark.points(2)
def test_causal_average_of_one_two_three(impl, device):
    x = torch.tensor([[[1.0], [2.0], [3.0]]], device=device)  # (1, 3, 1)
    expected = torch.tensor([[[1.0], [1.5], [2.0]]], device=device)
    assert_close(impl.masking.causal_average(x), expected, atol=1e-6, name="causal_average([[1], [2], [3]])",
                 hint="position t is the mean of x[:, 0..t]: 1, (1+2)/2, (1+2+3)/3, each sum divided by t+1, the "
                      "number of positions it averages.")


@pytest.mark.points(1)
def test_first_position_is_kept_and_last_is_the_mean_of_all(impl, device, seed):
    x = torch.randn(3, 9, 4, device=device)
    out = expect_tensor(impl.masking.causal_average(x), name="causal_average(x)")
    assert_close(out[:, 0], x[:, 0], atol=1e-6, name="causal_average(x)[:, 0]",
                 hint="position 0 has only itself to average.")
    assert_close(out[:, -1], x.mean(dim=1), atol=1e-5, name="causal_average(x)[:, -1]",
                 hint="the last position averages the whole sequence.")


@pytest.mark.points(2)
def test_causal_average_does_not_see_the_future(impl, device, seed):
    x = torch.randn(2, 8, 3, device=device)
    changed = x.clone()
    changed[:, 5] += 10.0  # only position 5 changes
    before = expect_tensor(impl.masking.causal_average(x), name="causal_average(x)")
    after = expect_tensor(impl.masking.causal_average(changed), name="causal_average(x)")
    assert_close(after[:, :5], before[:, :5], atol=1e-5, name="output at positions 0..4",
                 hint="it changed when only position 5 of the input changed: the future leaks into the past.")


@pytest.mark.points(2)
def test_masked_weights_are_zero_above_the_diagonal_and_rows_sum_to_one(impl, device, seed):
    weight = torch.randn(6, 6, device=device)
    out = expect_tensor(impl.masking.weight_mask_and_normalization(weight), name="weight_mask_and_normalization()")
    upper = torch.ones(6, 6, dtype=torch.bool, device=device).triu(diagonal=1)
    assert_close(out.masked_fill(~upper, 0.0), torch.zeros(6, 6, device=device), atol=0.0,
                 name="the weights above the diagonal",
                 hint="row i may only use columns 0..i: set the scores above the diagonal to -inf before softmax.")
    assert_close(out.sum(dim=-1), torch.ones(6, device=device), atol=1e-5, name="the row sums",
                 hint="softmax over the last dim (each row), after masking.")


@pytest.mark.hint_after("test_masked_weights_are_zero_above_the_diagonal_and_rows_sum_to_one")  # blocks by value
@pytest.mark.points(1)
def test_equal_scores_give_the_course_notes_averaging_weights(impl, device):
    out = impl.masking.weight_mask_and_normalization(torch.zeros(4, 4, device=device))
    expected = torch.tensor([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4], device=device)
    assert_close(out, expected, atol=1e-6, name="weight_mask_and_normalization(zeros(4, 4))",
                 hint="a score of 0 is a real score: decide what to block from the position (tril), not from the "
                      "value of the score.")


@pytest.mark.points(1)
def test_look_ahead_mask_keeps_the_past_and_the_present(impl):
    mask = expect_tensor(impl.masking.create_look_ahead_mask(4), name="create_look_ahead_mask(4)")
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).view(1, 1, 4, 4)
    assert_close((mask != 0).long().cpu(), expected, atol=0.0, name="(create_look_ahead_mask(4) != 0)",
                 hint="a (1, 1, 4, 4) keep mask, nonzero where column <= row: the lower triangle with its diagonal.")


@pytest.mark.points(1)
def test_causal_mask_is_zero_below_and_minus_infinity_above(impl):
    mask = expect_tensor(impl.masking.causal_mask(4), name="causal_mask(4)").cpu()
    if tuple(mask.shape) != (1, 1, 4, 4):
        raise AssertionError(tr("causal_mask(4) has shape {shape}, expected (1, 1, 4, 4): the two leading 1s "
                                "broadcast over batch and heads.", shape=tuple(mask.shape)))
    if not mask.is_floating_point():
        raise AssertionError(tr("causal_mask(4) has dtype {dtype}, expected a float dtype: it holds -inf.",
                                dtype=mask.dtype))
    above = torch.ones(1, 1, 4, 4, dtype=torch.bool).triu(diagonal=1)
    assert_close(mask.masked_fill(above, 0.0), torch.zeros(1, 1, 4, 4, dtype=mask.dtype), atol=0.0,
                 name="causal_mask(4) on and below the diagonal", hint="0 where attending is allowed (column <= row).")
    leaks = above & ~(mask <= -1e9)  # -1e9 blocks as surely as -inf
    if leaks.any():
        row, col = (int(i) for i in leaks[0, 0].nonzero()[0])
        raise AssertionError(tr("causal_mask(4)[0, 0, {row}, {col}] is {value}, expected -inf: above the diagonal "
                                "(column > row) the future must be blocked, and adding -inf to a score is what "
                                "blocks it.", row=row, col=col, value=format(mask[0, 0, row, col].item(), "g")))
