"""`checks` compares a submission's tensors with the reference's so that a failure reads as feedback.

Every helper takes the reference (a local object) and the submission (a `Remote`) alike, so a
test states a property once and checks both sides the same way. Its float64 goldens (`golden`,
`float64`) and random inputs (`random_keep_mask`) are here too.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from grader.inside.shared import instrument
from grader.judge.expect import expect_tensor, hint_suffix
from grader.judge.measures import count_ops  # noqa: F401  (grader.judge.diagnosis imports it from here)
from grader.judge.structure import describe  # noqa: F401  (grader.judge.diagnosis imports it from here)
from grader.lang import N_, plural, tr

EPS32 = torch.finfo(torch.float32).eps


def manual_seed(value: int) -> None:
    """`torch.manual_seed` for the trusted side, without its cost on a machine with no GPU.

    torch.manual_seed also queues a seeding for every accelerator backend not yet started (CUDA, XPU,
    MTIA), each recording a formatted stack trace: about 0.3 ms a call, 170 calls per graded run.
    """
    torch.random.default_generator.manual_seed(value)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(value)


# --- comparing tensors -------------------------------------------------------------------------


# What a NaN is evidence of, whatever the test was after: a test's own hint speaks of wrong values, not of NaN.
# In English here (`tr(NAN_HINT)` where shown): the plugin looks for either in a message.
NAN_HINT = N_("a softmax gives NaN where every value it normalises is -inf (is it over the keys, dim=-1, and can a "
              "whole row be masked?), and exp() overflows to inf then NaN.")



def assert_close(
    actual: Any,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float = 0.0,
    name: str = "output",
    hint: str = "",
    check_dtype: bool = True,
) -> None:
    """Fail with a short, student-readable message: shape, dtype and NaN first, then the worst entry."""
    name, hint = tr(name), tr(hint)  # the suites write English (grader.extract)
    if not (math.isfinite(atol) and math.isfinite(rtol)):
        # A NaN tolerance would let every answer pass: a bug in the test, never the student's.
        raise ValueError(f"assert_close for {name} got tolerance atol={atol}, rtol={rtol}: fix the test")
    actual = expect_tensor(actual, name=name)
    suffix = hint_suffix(hint)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(tr("{name} has shape {shape}, expected {expected}.", name=name,
                                shape=tuple(actual.shape), expected=tuple(expected.shape)) + suffix)
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(tr("{name} has dtype {dtype}, expected {expected} (same as the inputs).", name=name,
                                dtype=actual.dtype, expected=expected.dtype))
    actual_d = actual.detach().to("cpu", torch.float64)
    expected_d = expected.detach().to("cpu", torch.float64)
    bad_nan = torch.isnan(actual_d) & ~torch.isnan(expected_d)
    if bad_nan.any():
        index = _index(bad_nan)
        raise AssertionError(
            plural(int(bad_nan.sum()), N_("{name} has 1 NaN value, at index {index}; expected {expected}."),
                   N_("{name} has {count} NaN values, first at index {index}; expected {expected}."), name=name,
                   index=index, expected=format(expected_d[index].item(), ".6g"))
            + hint_suffix(tr(NAN_HINT))
        )
    error = (actual_d - expected_d).abs()
    error = torch.where(actual_d == expected_d, torch.zeros_like(error), error)  # equal infinities
    error = torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)  # inf vs -inf, or NaN
    error = torch.where(torch.isnan(actual_d) & torch.isnan(expected_d), torch.zeros_like(error), error)
    allowed = atol + rtol * torch.where(torch.isfinite(expected_d), expected_d.abs(), torch.zeros_like(error))
    excess = error - allowed
    if (excess > 0).any():
        index = _index(excess == excess.max())
        count = int((excess > 0).sum())
        raise AssertionError(
            tr("{name} differs from the expected value at index {index}: got {got}, expected {expected} "
               "(error {error}, tolerance {tolerance}); {count} of {total} values are off.", name=name, index=index,
               got=format(actual_d[index].item(), ".6g"), expected=format(expected_d[index].item(), ".6g"),
               error=format(error[index].item(), ".3g"), tolerance=format(allowed[index].item(), ".3g"), count=count,
               total=error.numel())
            + suffix
        )


def tolerance(ref32: torch.Tensor, golden64: torch.Tensor, *, factor: float = 16.0) -> float:
    """An absolute tolerance derived from how far a float32 reference lands from the float64 golden.

    Any correct float32 computation (einsum or matmul, -inf or -1e9, softmax in float32 inside a
    float64 run) errs by about as much as the reference does; wrong code errs by orders more.
    """
    if not (torch.isfinite(golden64).all() and torch.isfinite(ref32).all()):
        raise ValueError("the golden or the float32 reference is not finite (a row with every key blocked?): "
                         "fix the test's inputs")
    err = (ref32.detach().double().cpu() - golden64.detach().double().cpu()).abs().max().item()
    scale = max(1.0, golden64.detach().abs().max().item()) if golden64.numel() else 1.0
    return max(factor * err, 8 * EPS32 * scale)


def _index(mask: torch.Tensor) -> tuple[int, ...]:
    flat = int(torch.nonzero(mask.reshape(-1))[0].item())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape)) if mask.dim() else ()


# --- references and inputs ---------------------------------------------------------------------


def random_keep_mask(shape: Sequence[int], *, p_keep: float = 0.7, generator: torch.Generator | None = None,
                     device: torch.device | str = "cpu") -> torch.Tensor:
    """A random boolean keep mask in which every row keeps at least one key (key 0 where none was drawn).

    Combined with another mask (causal, say) a row may still end up fully blocked: check the golden.
    """
    mask = torch.rand(*shape, generator=generator) < p_keep
    rows = ~mask.any(dim=-1, keepdim=True)
    first = torch.zeros_like(mask)
    first[..., 0] = True
    return (mask | (rows & first)).to(device)


def golden(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a reference function on float64 copies of every floating tensor argument.

    A reference module, or a method of one, runs in float64 too (see `float64`).
    """
    module = instrument.module_of(fn)
    with float64(module) if module is not None else contextlib.nullcontext():
        return fn(*_to_double(args), **_to_double(kwargs))


@contextlib.contextmanager
def float64(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """A float32 reference module computes in float64 inside the block and is float32 again after.

    Float32 to float64 and back is exact, so the module leaves the block as it came in. This is
    what `copy.deepcopy(module).double()` gives, at a fraction of the cost (a deep copy of a
    Transformer takes longer than its forward pass). Gradients computed inside the block keep
    float64: they are detached from the parameters before the module converts back.
    """
    tensors = [*module.parameters(), *module.buffers()]
    if any(t.is_floating_point() and t.dtype != torch.float32 for t in tensors):
        raise ValueError("float64() takes a float32 module: it converts the module back to float32 after the block")
    module.double()
    try:
        yield module
    finally:
        module.zero_grad(set_to_none=True)
        module.float()


def _to_double(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, tuple):
        return tuple(_to_double(v) for v in value)
    if isinstance(value, list):
        return [_to_double(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_double(v) for k, v in value.items()}
    return value
