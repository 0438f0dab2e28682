"""Public tests for exercises/positional_encoding.py: the table's shape, its first rows by hand, forward.

Run them with `grader check positional_encoding`. They need no reference solution: every expected
value comes straight from the formula, computed here with Python's math module.
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    NotImplementedYet,
    SubmissionFailure,
    assert_close,
    describe,
    expect_dropout,
    expect_tensor,
    hint_on_crash,
    hint_suffix,
    tr,
)


def by_hand(position: int, d_model: int) -> list[float]:
    """pe[0, position] from the formula: sin in the even columns, cos in the odd ones."""
    angles = [position / 10000 ** (2 * (j // 2) / d_model) for j in range(d_model)]
    return [math.sin(a) if j % 2 == 0 else math.cos(a) for j, a in enumerate(angles)]


def table(impl, d_model: int, max_len: int) -> torch.Tensor:
    module = impl.positional_encoding.PositionalEncoding(d_model, max_len=max_len)
    return expect_tensor(module.pe, name="PositionalEncoding.pe").detach().cpu()


def as_3d(pe: torch.Tensor) -> torch.Tensor:
    """A table missing its leading batch dim costs the shape test only, not the tests of its values."""
    return pe.unsqueeze(0) if pe.dim() == 2 else pe


@pytest.mark.points(2)
def test_pe_has_shape_one_by_max_len_by_d_model(impl):
    pe = table(impl, 8, 20)
    if tuple(pe.shape) != (1, 20, 8):
        hint = (N_("the leading 1 broadcasts over the batch: register pe.unsqueeze(0).") if tuple(pe.shape) == (20, 8)
                else N_("build a (max_len, d_model) table, a sin or a cos in every column, then register "
                        "pe.unsqueeze(0)."))
        raise AssertionError(tr("PositionalEncoding(8, max_len=20).pe has shape {shape}, expected (1, 20, 8) = "
                                "(1, max_len, d_model).", shape=tuple(pe.shape)) + hint_suffix(tr(hint)))


@pytest.mark.confirmed_by("test_forward_adds_the_encodings_of_the_first_T_positions")
@pytest.mark.points(1)
def test_pe_is_a_buffer_not_a_parameter(impl):
    info = describe(impl.positional_encoding.PositionalEncoding(8, max_len=20))
    if "pe" in info.parameters:
        raise AssertionError(tr("pe is an nn.Parameter, so the optimiser would train it.")
                             + hint_suffix(tr("the table is fixed: self.register_buffer('pe', pe).")))
    if "pe" not in info.buffers:
        found = sorted(info.buffers) or tr("none")
        raise AssertionError(tr("PositionalEncoding has no buffer named pe (its buffers: {found}).", found=found)
                             + hint_suffix(tr("self.register_buffer('pe', pe), not self.pe = pe.")))


@pytest.mark.points(2)
def test_position_zero_is_zero_one_alternating(impl):
    pe = as_3d(table(impl, 8, 20))
    assert_close(pe[0, 0], torch.tensor([0.0, 1, 0, 1, 0, 1, 0, 1]), atol=1e-6, name="pe[0, 0]", check_dtype=False,
                 hint="at position 0 every angle is 0: sin(0) = 0 in the even columns, cos(0) = 1 in the odd ones.")


@pytest.mark.points(2)
def test_position_one_matches_the_formula_by_hand(impl):
    pe = as_3d(table(impl, 8, 20))
    expected = torch.tensor(by_hand(1, 8), dtype=torch.float64)
    assert_close(pe[0, 1], expected, atol=1e-6, name="pe[0, 1]", check_dtype=False,
                 hint="columns 2i and 2i+1 hold sin and cos of 1 / 10000^(2i / d_model), i = column // 2.")


@pytest.mark.points(1)
def test_values_lie_between_minus_one_and_one(impl):
    pe = table(impl, 16, 100)
    largest = pe.abs().max().item() if pe.numel() else 0.0
    if not largest <= 1.0:
        raise AssertionError(tr("pe holds a value of absolute value {largest}, expected every value in [-1, 1].",
                                largest=format(largest, ".4g"))
                             + hint_suffix(tr("every entry is a sin or a cos.")))


@pytest.mark.points(2)
def test_forward_adds_the_encodings_of_the_first_T_positions(impl, device, seed):
    module = impl.positional_encoding.PositionalEncoding(8, max_len=20).to(device)
    pe = as_3d(expect_tensor(module.pe, name="PositionalEncoding.pe").detach())
    x = torch.randn(2, 5, 8, device=device)
    hint = N_("return x + self.pe[:, :T] with T = x.size(1), the first T rows of the table (then dropout, which is "
              "off by default); keep pe in float32 so that the output stays float32.")
    try:
        out = module(x)
    except SubmissionFailure as failure:
        if isinstance(failure, NotImplementedYet):
            raise
        raise SubmissionFailure(str(failure) + hint_suffix(tr(hint))) from None
    assert_close(out, (x + pe[:, :5]).to(x.dtype), atol=1e-6,
                 name="PositionalEncoding(8, max_len=20)(x) for x of shape (2, 5, 8)", hint=hint)


FORWARD_HINT = N_("return x + self.pe[:, :T] with T = x.size(1): the first T rows of the (1, max_len, d_model) "
                  "table.")
DROPOUT_HINT = N_("self.dropout = nn.Dropout(dropout) with the constructor's dropout argument (default 0.0), "
                  "applied once, to the sum.")


@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_dropout_drops_with_the_probability_it_was_given(impl, seed, p):
    module = impl.positional_encoding.PositionalEncoding(16, max_len=50, dropout=p)
    with hint_on_crash(FORWARD_HINT):
        expect_dropout("PositionalEncoding", module, p, what=f"PositionalEncoding(16, dropout={p})",
                       hint=DROPOUT_HINT)
        expect_dropout("PositionalEncoding", module, p, what=f"PositionalEncoding(16, dropout={p})",
                       training=False, hint="nn.Dropout does nothing in eval mode: use self.dropout.")
