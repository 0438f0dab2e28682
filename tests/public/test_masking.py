"""Public tests for exercises/masking.py: shapes, small known answers, and the causal property.

Run them with `grader check masking`. They need no reference solution: every expected value is a
number you can check by hand, a property any correct causal mask has, or `causal_average`'s loop
definition run in float64 (the tolerance is how far the same loop lands from it in float32).
Vectorisation is judged twice: by the number of aten operations a call dispatches and of lines of the
submission's Python it runs, at two lengths drawn for each grading, which must neither grow with T nor
exceed a bound far below the longer length (counted in a worker where only code the reader accepts has
run), and by the submitted source, read in the grader's own process, which must show no Python loop
(grader/judge/loops/).
"""


import pytest
import torch

from grader.judge.loops import python_loops
from grader.testing import (
    N_,
    assert_close,
    count_ops,
    expect_tensor,
    hint_on_crash,
    hint_suffix,
    tolerance,
    tr,
)

AVERAGE_HINT = N_("out[:, t] is the mean of x[:, 0..t]: weights with 1/(t+1) in columns 0..t of row t, then "
                  "weights @ x.")


def loop_definition(x: torch.Tensor) -> torch.Tensor:
    """causal_average by its definition, one position at a time (version 1 of the docstring)."""
    return torch.stack([x[:, : t + 1].mean(dim=1) for t in range(x.size(1))], dim=1)


def check_average(impl, x: torch.Tensor, *, hint: str = AVERAGE_HINT) -> None:
    """causal_average(x) against the loop definition in float64, within the loop's own error in float32."""
    expected = loop_definition(x.double())
    atol = tolerance(loop_definition(x.float()), expected)
    assert_close(impl.masking.causal_average(x), expected.to(x.dtype), atol=atol, name="causal_average(x)", hint=hint)


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


@pytest.mark.hint_after("test_causal_average_of_one_two_three")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_causal_average_float64_in_float64_out(impl, device, seed):
    check_average(impl, torch.randn(2, 9, 3, dtype=torch.float64, device=device),
                  hint="in float64: build the weights with dtype=x.dtype and device=x.device, not in float32.")


SHORT, LONG = (4, 16), (256, 1024)  # the two lengths are drawn from these ranges, for each grading
OPERATIONS = 100  # torch operations, at most, at any T: the correct variants run 4 to 23, a loop 1+ per position
LINES = 100  # lines of the submission's Python, at most, at any T: the correct variants run 2 to 21
SLACK = 8  # how many more of either the longer length may take (a branch on T)


@pytest.mark.points(4)
@pytest.mark.fresh_worker  # one that has imported masking.py (and what it imports) only: what grader.judge.loops reads
def test_causal_average_is_vectorised(impl, device, seed, grading):
    # Counted in a worker where only code the reader accepts has run, so nothing there rewrites or sees the counting;
    # and a count can only be raised, never lowered: padding one flat costs as much as the loop it hides.
    t_short, t_long = (int(torch.randint(low, high + 1, ())) for low, high in (SHORT, LONG))
    short, long = torch.randn(2, t_short, 4, device=device), torch.randn(1, t_long, 2, device=device)
    at_short = count_ops(impl.masking.causal_average, short)
    at_long = count_ops(impl.masking.causal_average, long)
    expected = loop_definition(long.double())
    assert_close(at_long.value, expected.float(), atol=tolerance(loop_definition(long), expected),
                 name=tr("causal_average(x) at T={T}", T=t_long),
                 hint="get the values right first: out[:, t] is the mean of x[:, 0..t]: weights with 1/(t+1) in "
                      "columns 0..t of row t, then weights @ x.")
    hint = hint_suffix(tr("build the (T, T) weight matrix once and replace the loop by one matrix product, "
                          "weights @ x."))
    counts = {"short": t_short, "long": t_long}
    if at_long.lines > at_short.lines + SLACK:
        raise AssertionError(tr("causal_average ran {at_short} lines of your Python at T={short} and {at_long} at "
                                "T={long}: code of yours runs once per position, a loop however it is written.",
                                at_short=at_short.lines, at_long=at_long.lines, **counts) + hint)
    if at_long.lines > LINES:
        raise AssertionError(tr("causal_average ran {at_long} lines of your Python at T={long}, where a vectorised "
                                "version runs a few dozen at most: code of yours runs once per position, a loop "
                                "however it is written.", at_long=at_long.lines, **counts) + hint)
    if at_long.total > at_short.total + SLACK or at_long.total > OPERATIONS:
        counts |= {"at_short": at_short.total, "at_long": at_long.total, "most": OPERATIONS}
        if at_long.total > at_short.total + SLACK:
            message = tr("causal_average dispatched {at_short} torch operations at T={short} and {at_long} at "
                         "T={long}: its work grows with T, so it loops over the positions (a vectorised version "
                         "runs the same number at any T).", **counts)
        else:
            message = tr("causal_average dispatched {at_long} torch operations at T={long}, where a vectorised "
                         "version runs at most {most} at any T: that many is one or more per position, a loop over "
                         "them however it is written.", **counts)
        raise AssertionError(message + hint)
    refused = python_loops(grading.submission.files, "masking", "causal_average")
    if refused:
        lines = len({(r.file, r.line) for r in refused})
        first = refused[0]
        if lines == 1:
            refusal = tr("causal_average gives the right values, but the grader, which reads the source for any "
                         "Python loop, could not accept {first}.", first=first)
        elif lines == 2:
            refusal = tr("causal_average gives the right values, but the grader, which reads the source for any "
                         "Python loop, could not accept {first} (and 1 more line).", first=first)
        else:
            refusal = tr("causal_average gives the right values, but the grader, which reads the source for any "
                         "Python loop, could not accept {first} (and {more} more lines).", first=first,
                         more=lines - 1)
        # The reader's hint comes in the language in use (grader.judge.loops), without its closing full stop.
        raise AssertionError(refusal + hint_suffix(tr("{recipe}.", recipe=first.hint)))


@pytest.mark.points(1)
def test_weights_above_the_diagonal_are_exactly_zero_and_rows_sum_to_one(impl, device, seed):
    weight = torch.randn(2, 3, 9, 9, device=device)
    with hint_on_crash(N_("T = weight.size(-1); a (T, T) mask broadcasts over the leading dims.")):
        out = expect_tensor(impl.masking.weight_mask_and_normalization(weight), name="weight_mask_and_normalization()")
    upper = torch.ones(9, 9, dtype=torch.bool, device=device).triu(diagonal=1).expand(2, 3, 9, 9)
    assert_close(out.masked_fill(~upper, 0.0) if out.shape == upper.shape else out,
                 torch.zeros(2, 3, 9, 9, device=device), atol=0.0, name="the weights above the diagonal",
                 hint="block them with -inf before the softmax.")
    assert_close(out.sum(dim=-1), torch.ones(2, 3, 9, device=device), atol=1e-5, name="the row sums",
                 hint="softmax over the last dim, so that each row sums to 1.")
