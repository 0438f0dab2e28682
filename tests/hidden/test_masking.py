"""Hidden tests for exercises/masking.py: agreement with float64 goldens, mask patterns, any device.

`causal_average` is compared with its loop definition run in float64; `weight_mask_and_normalization`
with the float64 golden of the reference. Each tolerance is derived from how far the float32
reference lands from that golden on the same inputs. Vectorisation is judged in the public suite
(tests/public/test_masking.py), where a student sees it before handing in.
"""


import pytest
import torch

from grader.testing import (
    N_,
    assert_close,
    expect_tensor,
    golden,
    hint_on_crash,
    hint_suffix,
    tolerance,
    tr,
)

AVERAGE_SHAPES = {"B1 T1 C1": (1, 1, 1), "B2 T5 C3": (2, 5, 3), "B3 T17 C4": (3, 17, 4), "B2 T64 C6": (2, 64, 6)}
LEADING = {"no leading dims": (), "batch": (3,), "batch and heads": (2, 3), "three leading dims": (2, 1, 3)}
LENGTHS = [1, 2, 7, 33]
AVERAGE_HINT = N_("out[:, t] is the mean of x[:, 0..t]: weights with 1/(t+1) in columns 0..t of row t, then "
                  "weights @ x.")
WEIGHTS_HINT = N_("mask the last two dims with a (T, T) tril keep mask, T = weight.size(-1) (it broadcasts over the "
                  "leading dims), then softmax over dim=-1.")
DEVICE_HINT = N_("make every new tensor where the input is, torch.ones(T, T, dtype=x.dtype, device=x.device), or build "
                 "it from the input (torch.ones_like, x.new_ones).")


def loop_definition(x: torch.Tensor) -> torch.Tensor:
    """causal_average by its definition, one position at a time (version 1 of the docstring)."""
    return torch.stack([x[:, : t + 1].mean(dim=1) for t in range(x.size(1))], dim=1)


def check_average(impl, ref, x: torch.Tensor, *, hint: str = AVERAGE_HINT) -> None:
    expected = loop_definition(x.double())
    atol = tolerance(ref.masking.causal_average(x.float()), expected)
    assert_close(impl.masking.causal_average(x), expected.to(x.dtype), atol=atol, name="causal_average(x)", hint=hint)


@pytest.mark.points(1)
@pytest.mark.parametrize("shape", AVERAGE_SHAPES.values(), ids=AVERAGE_SHAPES.keys())
def test_causal_average_matches_the_loop_definition(impl, ref, device, seed, shape):
    check_average(impl, ref, torch.randn(*shape, device=device))


@pytest.mark.points(1)
@pytest.mark.parametrize("leading", LEADING.values(), ids=LEADING.keys())
def test_weight_mask_and_normalization_matches_golden(impl, ref, device, seed, leading):
    weight = torch.randn(*leading, 7, 7, device=device)
    expected = golden(ref.masking.weight_mask_and_normalization, weight)
    atol = tolerance(ref.masking.weight_mask_and_normalization(weight), expected)
    with hint_on_crash(WEIGHTS_HINT):
        out = impl.masking.weight_mask_and_normalization(weight)
    assert_close(out, expected.float(), atol=atol, name="weight_mask_and_normalization(weight)", hint=WEIGHTS_HINT)


@pytest.mark.hint_after("test_weight_mask_and_normalization_matches_golden")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_weight_mask_and_normalization_float64_in_float64_out(impl, ref, device, seed):
    weight = torch.randn(3, 6, 6, dtype=torch.float64, device=device)
    expected = ref.masking.weight_mask_and_normalization(weight)
    atol = tolerance(ref.masking.weight_mask_and_normalization(weight.float()), expected)
    assert_close(impl.masking.weight_mask_and_normalization(weight), expected, atol=atol,
                 name="weight_mask_and_normalization(weight)",
                 hint="in float64: keep the dtype of the input, no .float() and no mask or tensor made in float32.")


@pytest.mark.hint_after("test_weight_mask_and_normalization_matches_golden")  # its hint assumes the plain case is right
@pytest.mark.points(1)
def test_large_scores_give_no_nan(impl, ref, device, seed):
    weight = torch.randn(2, 8, 8, device=device) * 100.0
    expected = golden(ref.masking.weight_mask_and_normalization, weight)
    atol = tolerance(ref.masking.weight_mask_and_normalization(weight), expected)
    assert_close(impl.masking.weight_mask_and_normalization(weight), expected.float(), atol=atol,
                 name="weight_mask_and_normalization(100 * weight)",
                 hint="use torch.softmax (it subtracts the row max); exp() of large scores overflows to inf.")


@pytest.mark.points(1)
@pytest.mark.parametrize("seq_len", LENGTHS, ids=[f"L{n}" for n in LENGTHS])
def test_look_ahead_mask_is_nonzero_exactly_where_column_le_row(impl, seq_len):
    name = f"create_look_ahead_mask({seq_len})"
    mask = expect_tensor(impl.masking.create_look_ahead_mask(seq_len), name=name)
    expected = torch.ones(seq_len, seq_len, dtype=torch.bool).tril().view(1, 1, seq_len, seq_len)
    assert_close((mask != 0).cpu(), expected, atol=0.0, name=f"({name} != 0)",
                 hint="a (1, 1, L, L) keep mask: nonzero (kept) on and below the diagonal, 0 above it; torch.tril "
                      "keeps the diagonal with its default diagonal=0.")


@pytest.mark.points(1)
@pytest.mark.parametrize("seq_len", LENGTHS, ids=[f"L{n}" for n in LENGTHS])
def test_causal_mask_is_zero_on_and_below_the_diagonal_and_minus_infinity_above(impl, seq_len):
    name = f"causal_mask({seq_len})"
    mask = expect_tensor(impl.masking.causal_mask(seq_len), name=name).cpu()
    shape = (1, 1, seq_len, seq_len)
    if tuple(mask.shape) != shape:
        raise AssertionError(tr("{name} has shape {shape}, expected {expected}: the two leading 1s broadcast over "
                                "batch and heads.", name=name, shape=tuple(mask.shape), expected=shape))
    if not mask.is_floating_point():
        raise AssertionError(tr("{name} has dtype {dtype}, expected a float dtype: it holds -inf.", name=name,
                                dtype=mask.dtype))
    above = torch.ones(shape, dtype=torch.bool).triu(diagonal=1)
    assert_close(mask.masked_fill(above, 0.0), torch.zeros(shape, dtype=mask.dtype), atol=0.0,
                 name=tr("{name} on and below the diagonal", name=name),
                 hint="0 where attending is allowed (column <= row): torch.triu(full of -inf, diagonal=1) keeps the "
                      "diagonal at 0.")
    leaks = above & ~(mask <= -1e9)  # -1e9 blocks as surely as -inf
    if leaks.any():
        row, col = (int(i) for i in leaks[0, 0].nonzero()[0])
        raise AssertionError(tr("{entry} is {value}, expected -inf: above the diagonal (column > row) the future "
                                "must be blocked, and adding -inf to a score is what blocks it.",
                                entry=f"{name}[0, 0, {row}, {col}]", value=format(mask[0, 0, row, col].item(), "g")))


@pytest.mark.points(1)
@pytest.mark.parametrize("seq_len", [2, 5, 16], ids=["L2", "L5", "L16"])
def test_keep_mask_and_additive_mask_give_the_same_softmax(impl, device, seed, seq_len):
    scores = torch.randn(2, 3, seq_len, seq_len, device=device)
    keep = expect_tensor(impl.masking.create_look_ahead_mask(seq_len), name="create_look_ahead_mask()").to(device)
    additive = expect_tensor(impl.masking.causal_mask(seq_len), name="causal_mask()").to(device, scores.dtype)
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    expected = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    assert_close(scores.masked_fill(keep == 0, float("-inf")).softmax(dim=-1), expected, atol=1e-6,
                 name="softmax(scores.masked_fill(look_ahead_mask == 0, -inf))",
                 hint="the keep mask must keep exactly the past and the present (column <= row).")
    assert_close((scores + additive).softmax(dim=-1), expected, atol=1e-6, name="softmax(scores + causal_mask)",
                 hint="adding the causal mask must block the same entries the keep mask blocks: 0 where kept, "
                      "-inf where blocked (a 1 only nudges a score, it blocks nothing).")


# --- any device --------------------------------------------------------------------------------


@pytest.mark.points(1)
@pytest.mark.real_device  # on a CPU, feedback only: a submission can tell the stand-in device from a real one
@pytest.mark.warm_worker  # fake tensors (probes.on_another_device)
@pytest.mark.parametrize(("function", "shape"), [("causal_average", [2, 5, 3]),
                                                 ("weight_mask_and_normalization", [2, 5, 5])])
def test_works_for_inputs_on_any_device(impl, ref, device, function, shape):
    if device.type == "cuda":  # a real device: the points are earned here, by values checked in this process
        x = torch.randn(*shape, device=device)
        expected = golden(getattr(ref.masking, function), x)
        with hint_on_crash(DEVICE_HINT):
            out = expect_tensor(getattr(impl.masking, function)(x), name=f"{function}(x)")
        assert out.device == x.device, tr("{function} returned a tensor on {device} for an input on {input_device}.",
                                          function=function, device=out.device, input_device=x.device)
        # Values that differ (rather than a crash) say nothing of devices: the function's own recipe is the hint.
        assert_close(out, expected.float(), atol=tolerance(getattr(ref.masking, function)(x), expected),
                     name=tr("{function}(x) on {device}", function=function, device=device),
                     hint=AVERAGE_HINT if function == "causal_average" else WEIGHTS_HINT)
        return
    why = impl.probes.on_another_device(getattr(impl.masking, function), {"shape": shape, "dtype": "float32"})
    assert isinstance(why, str) and not why, (
        tr("{function} mixes devices: with its input on another device (the grader's stand-in for a GPU, 'meta'), "
           "torch said: {error}.", function=function, error=str(why).rstrip("!. "))
        + hint_suffix(tr(DEVICE_HINT) + " " + tr("(Feedback only: on a machine without a GPU this test is worth no "
                                                 "points; a run with --device cuda awards them.)"))
    )
