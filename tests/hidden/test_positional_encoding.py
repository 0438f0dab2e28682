"""Hidden tests for exercises/positional_encoding.py: the buffer, its values at every position, forward, dropout.

The float64 golden is the formula itself. The course notes' float32 computation,
sin(position * exp(2i * -log(10000) / d_model)), errs more the larger the position (the angle grows
to thousands of radians, and its rounding error with it), so each position p gets its own tolerance:
16 times the largest error that float32 computation makes at positions 0..p.
"""

import functools
import math

import pytest
import torch

from grader.testing import (
    EPS32,
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_tensor,
    hint_on_crash,
    hint_suffix,
    tr,
)

SIZES = {"d16 max_len 50": (16, 50), "d64 default max_len 5000": (64, None), "d6 max_len 7": (6, 7)}
DEFAULT_MAX_LEN = 5000
FORMULA_HINT = N_("pe[0, p, 2i] = sin(p / 10000^(2i / d_model)) and pe[0, p, 2i+1] = cos(the same angle), "
                  "with positions p = 0 .. max_len-1.")


@functools.cache
def golden_pe(d_model: int, max_len: int) -> torch.Tensor:
    """The formula in float64: (1, max_len, d_model)."""
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (max_len, d_model/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(1, max_len, d_model)


def course_notes_pe32(d_model: int, max_len: int) -> torch.Tensor:
    """The course notes' computation, all in float32: (1, max_len, d_model)."""
    position = torch.arange(0, max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.unsqueeze(0)


@functools.cache
def per_position_tolerance(d_model: int, max_len: int, *, factor: float = 16.0) -> torch.Tensor:
    """(max_len,): factor times the worst float32 error of the course notes' computation up to each position."""
    error = (course_notes_pe32(d_model, max_len).double() - golden_pe(d_model, max_len)).abs().amax(dim=-1)[0]
    return (factor * error.cummax(dim=0).values).clamp(min=8 * EPS32)


def build(impl, device, d_model, max_len, **kwargs):
    if max_len is not None:
        kwargs["max_len"] = max_len
    return impl.positional_encoding.PositionalEncoding(d_model, **kwargs).to(device)


def check_table(pe: torch.Tensor, d_model: int, max_len: int) -> None:
    """pe against the golden, position by position; reports the first position that is off."""
    name = f"PositionalEncoding({d_model}).pe"
    pe = pe.detach().cpu()
    if tuple(pe.shape) == (max_len, d_model):
        pe = pe.unsqueeze(0)  # a missing batch dim costs the shape tests, not this one
    if tuple(pe.shape) != (1, max_len, d_model):
        raise AssertionError(tr("{name} has shape {shape}, expected {expected}.", name=name, shape=tuple(pe.shape),
                                expected=(1, max_len, d_model)))
    expected, tol = golden_pe(d_model, max_len), per_position_tolerance(d_model, max_len)
    error = (pe.double() - expected).abs().amax(dim=-1)[0]  # (max_len,)
    off = ~(error <= tol)  # NaN counts as off
    if off.any():
        p = int(off.nonzero()[0])
        assert_close(pe[0, p], expected[0, p], atol=float(tol[p]), name=f"pe[0, {p}]", check_dtype=False,
                     hint=tr("{off} of {max_len} positions are off, the first is position {p}.", off=int(off.sum()),
                             max_len=max_len, p=p) + " " + tr(FORMULA_HINT))


@pytest.mark.confirmed_by("test_forward_adds_pe_of_the_first_T_positions")
@pytest.mark.points(1)
@pytest.mark.parametrize(("d_model", "max_len"), SIZES.values(), ids=SIZES.keys())
def test_pe_is_a_float32_buffer_of_shape_1_max_len_d_model(impl, d_model, max_len):
    info = describe(build(impl, "cpu", d_model, max_len))
    if "pe" in info.parameters:
        raise AssertionError(tr("pe is an nn.Parameter, so the optimiser would train it and change the encoding.")
                             + hint_suffix(tr("self.register_buffer('pe', pe) keeps it fixed, saved and moved with "
                                              "the module.")))
    if "pe" not in info.buffers:
        found = sorted(info.buffers) or tr("none")
        raise AssertionError(tr("PositionalEncoding has no buffer named pe (its buffers: {found}).", found=found)
                             + hint_suffix(tr("self.register_buffer('pe', pe); a plain attribute is neither saved in "
                                              "state_dict nor moved by .to(device).")))
    shape, dtype = tuple(info.buffers["pe"]["shape"]), info.buffers["pe"]["dtype"]
    expected = (1, max_len or DEFAULT_MAX_LEN, d_model)
    if shape != expected:
        hint = (tr("the leading 1 broadcasts over the batch: register pe.unsqueeze(0).") if shape == expected[1:] else
                tr("build a (max_len, d_model) table, max_len = 5000 by default, then register pe.unsqueeze(0)."))
        raise AssertionError(tr("{name} has shape {shape}, expected {expected}.", name="pe", shape=shape,
                                expected=f"{expected} = (1, max_len, d_model)") + hint_suffix(hint))
    if dtype != "float32":
        raise AssertionError(tr("pe has dtype {dtype}, expected float32 (torch's default), so that float32 inputs stay "
                                "float32.", dtype=dtype)
                             + hint_suffix(tr("build the table with torch.zeros(max_len, d_model).")))


@pytest.mark.confirmed_by("test_forward_adds_pe_of_the_first_T_positions")
@pytest.mark.points(1)
def test_pe_is_not_a_trainable_parameter(impl):
    info = describe(build(impl, "cpu", 16, 50))
    if info.parameters:
        raise AssertionError(tr("PositionalEncoding has parameters {names}, expected none: the encoding is fixed, so "
                                "nothing in it is trained.", names=sorted(info.parameters))
                             + hint_suffix(tr("self.register_buffer('pe', pe).")))


@pytest.mark.points(2)
@pytest.mark.parametrize(("d_model", "max_len"), SIZES.values(), ids=SIZES.keys())
def test_pe_matches_the_formula_at_every_position(impl, d_model, max_len):
    module = build(impl, "cpu", d_model, max_len)
    check_table(expect_tensor(module.pe, name="PositionalEncoding.pe"), d_model, max_len or DEFAULT_MAX_LEN)


@pytest.mark.points(1)
def test_pe_values_lie_between_minus_one_and_one(impl):
    pe = expect_tensor(build(impl, "cpu", 64, None).pe, name="PositionalEncoding.pe")
    largest = pe.abs().max().item() if pe.numel() else 0.0
    if not largest <= 1.0:
        raise AssertionError(tr("pe holds a value of absolute value {largest}, expected every value in [-1, 1].",
                                largest=format(largest, ".4g"))
                             + hint_suffix(tr("every entry is a sin or a cos of an angle, so it lies in [-1, 1].")))


FORWARD = {
    "B1 T10 of 50": (1, 10, 16, 50, torch.float32),
    "B3 T37 of 50": (3, 37, 16, 50, torch.float32),
    "B2 T7 of 7": (2, 7, 6, 7, torch.float32),
    "float64 B2 T12 of 50": (2, 12, 16, 50, torch.float64),
}
FORWARD_HINT = N_("return x + self.pe[:, :T] with T = x.size(1): the first T rows of the (1, max_len, d_model) "
                  "table.")


def own_table(module, d_model: int, max_len: int) -> torch.Tensor | None:
    """The submission's own pe as (1, max_len, d_model), or None when it has none of that size."""
    try:
        pe = module.pe
    except SubmissionFailure:
        return None
    if not isinstance(pe, torch.Tensor) or pe.numel() != max_len * d_model:
        return None
    return pe.detach().reshape(1, max_len, d_model)


def check_sum(out, module, x: torch.Tensor, max_len: int, *, name: str, hint: str, keep=None, scale=1.0) -> None:
    """out == scale * (x + pe[:, :T]) (where `keep` is True), with pe the formula's or the submission's own table.

    Forward is judged on what it does with a table: a wrong table costs the tests of pe's values,
    not these too. A correct forward matches x + self.pe[:, :T] exactly, or the formula when it
    computes its own encoding.
    """
    T, d_model = x.shape[1], x.shape[2]
    golden = x.double().cpu() + golden_pe(d_model, T)
    candidates = [(golden, per_position_tolerance(d_model, max_len)[:T].max().item())]
    own = own_table(module, d_model, max_len)
    if own is not None:
        candidates.append((x.double().cpu() + own[:, :T].double().cpu(), 0.0))
    out = expect_tensor(out, name=name).cpu()
    keep = torch.ones(x.shape, dtype=torch.bool) if keep is None else keep.cpu()
    failure = None
    for expected, table_error in candidates:
        atol = scale * (table_error + 8 * EPS32 * max(1.0, expected.abs().max().item()))
        try:
            assert_close(torch.where(keep, out, 0.0) if out.shape == keep.shape else out,
                         torch.where(keep, scale * expected, 0.0).to(x.dtype), atol=atol, name=name, hint=hint,
                         check_dtype=False)
            return
        except AssertionError as error:
            failure = error
    raise failure


@pytest.mark.points(1)
@pytest.mark.parametrize(("batch", "T", "d_model", "max_len", "dtype"), FORWARD.values(), ids=FORWARD.keys())
def test_forward_adds_pe_of_the_first_T_positions(impl, device, seed, batch, T, d_model, max_len, dtype):
    module = build(impl, device, d_model, max_len)
    x = torch.randn(batch, T, d_model, dtype=dtype, device=device)
    with hint_on_crash(FORWARD_HINT):
        out = module(x)
    check_sum(out, module, x, max_len, name=f"PositionalEncoding({d_model}, max_len={max_len})(x)", hint=FORWARD_HINT)


@pytest.mark.points(1)
def test_float32_input_gives_float32_output(impl, device, seed):
    module = build(impl, device, 16, 50)
    with hint_on_crash(FORWARD_HINT):
        out = expect_tensor(module(torch.randn(2, 10, 16, device=device)), name="PositionalEncoding(16)(x)")
    if out.dtype != torch.float32:
        table = own_table(module, 16, 50)
        if table is None:
            hint = tr("return x + self.pe[:, :T], with pe a float32 buffer (torch.zeros(max_len, d_model)).")
        elif table.dtype != torch.float32:
            hint = tr("keep pe in float32 (torch.zeros(max_len, d_model)): yours is {dtype}, and the sum takes the "
                      "wider dtype of the two.", dtype=table.dtype)
        else:
            hint = tr("pe is float32, so look for a cast on the way: return x + self.pe[:, :T], through self.dropout.")
        raise AssertionError(tr("for a float32 x the output has dtype {dtype}, expected float32.", dtype=out.dtype)
                             + hint_suffix(hint))


@pytest.mark.hint_after("test_forward_adds_pe_of_the_first_T_positions")  # the same, without dropout
@pytest.mark.points(1)
def test_eval_mode_is_deterministic(impl, device, seed):
    module = build(impl, device, 16, 50, dropout=0.5)
    module.eval()
    x = torch.randn(2, 20, 16, device=device)
    hint = N_("nn.Dropout does nothing in eval mode: use self.dropout (an nn.Dropout), not torch.dropout(..., "
              "train=True).")
    for name in (N_("output in eval mode, first call"), N_("output in eval mode, second call")):
        with hint_on_crash(FORWARD_HINT):
            out = module(x)
        check_sum(out, module, x, 50, name=name, hint=hint)


@pytest.mark.hint_after("test_forward_adds_pe_of_the_first_T_positions")  # the same, without dropout
@pytest.mark.points(2)
def test_dropout_in_training_mode_acts_on_the_sum(impl, device, seed):
    module = build(impl, device, 16, 50, dropout=0.5)
    module.train()
    x = torch.randn(4, 32, 16, device=device)
    with hint_on_crash(FORWARD_HINT):
        out = expect_tensor(module(x), name="PositionalEncoding(16, dropout=0.5)(x)")
    if out.shape != x.shape:
        raise AssertionError(tr("the output has shape {shape}, expected {expected} like the input x",
                                shape=tuple(out.shape), expected=tuple(x.shape)))
    zeros = float((out == 0).double().mean())
    if not 0.3 < zeros < 0.7:
        raise AssertionError(tr("in training mode with dropout=0.5, {share} of the outputs are 0, expected about half.",
                                share=format(zeros, ".0%"))
                             + hint_suffix(tr("return self.dropout(x + self.pe[:, :T]): dropout is the last step, "
                                              "applied to the sum.")))
    check_sum(out, module, x, 50, keep=out != 0, scale=2.0, name="the outputs dropout kept",
              hint="they should be (x + pe) / (1 - p) = 2 (x + pe): return self.dropout(x + self.pe[:, :T]): dropout "
                   "is the last step, applied to the sum.")


# --- the default dropout -------------------------------------------------------------------------

@pytest.mark.hint_after("test_forward_adds_pe_of_the_first_T_positions")  # the same, without dropout
@pytest.mark.points(1)
def test_default_dropout_is_zero_in_training_mode(impl, device, seed):
    module = build(impl, device, 16, 50)
    module.train()
    x = torch.randn(2, 20, 16, device=device)
    with hint_on_crash(FORWARD_HINT):
        out = module(x)
    check_sum(out, module, x, 50, name="output in training mode of PositionalEncoding(16, max_len=50)",
              hint="built without a dropout argument the module has dropout=0.0, so even in training mode it "
                   "returns x + pe: self.dropout = nn.Dropout(dropout) with the constructor's dropout argument "
                   "(default 0.0), applied once, to the sum.")


