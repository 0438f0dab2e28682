"""`testing` gives graded tests their vocabulary: tensor checks whose failures read as feedback.

Every helper takes the reference (a local object) and the submission (a `Remote`) alike, so a
test states a property once and checks both sides the same way.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.host.remote import Remote
from grader.inside.shared import instrument

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


def expect_tensor(value: Any, *, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {_kind(value)}")
    return value


def expect_tuple(value: Any, length: int, *, name: str) -> tuple[Any, ...]:
    if not isinstance(value, (tuple, list)) or len(value) != length:
        raise AssertionError(f"{name} should return a tuple of {length} values, got {_kind(value)}")
    return tuple(value)


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
    if not (math.isfinite(atol) and math.isfinite(rtol)):
        # A NaN tolerance would let every answer pass: a bug in the test, never the student's.
        raise ValueError(f"assert_close for {name} got tolerance atol={atol}, rtol={rtol}: fix the test")
    actual = expect_tensor(actual, name=name)
    suffix = f" Hint: {hint}" if hint else ""
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{name} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}.{suffix}"
        )
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{name} has dtype {actual.dtype}, expected {expected.dtype} (same as the inputs).")
    actual_d = actual.detach().to("cpu", torch.float64)
    expected_d = expected.detach().to("cpu", torch.float64)
    bad_nan = torch.isnan(actual_d) & ~torch.isnan(expected_d)
    if bad_nan.any():
        index = _index(bad_nan)
        raise AssertionError(
            f"{name} has {int(bad_nan.sum())} NaN value(s), first at index {index}; "
            f"expected {expected_d[index].item():.6g}."
            f"{suffix or ' Hint: look for exp() overflowing or a whole row of -inf.'}"
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
            f"{name} differs from the expected value at index {index}: got {actual_d[index].item():.6g}, "
            f"expected {expected_d[index].item():.6g} (error {error[index].item():.3g}, tolerance "
            f"{allowed[index].item():.3g}); {count} of {error.numel()} values are off.{suffix}"
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


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values"
    if isinstance(value, Remote):
        return repr(value)
    return f"a {type(value).__name__}"


# --- asking more of a call than its value ------------------------------------------------------


def fresh_worker(submission: Any) -> None:
    """Start the next call in a new worker, so that only the modules imported from then on have run in it.

    What `grader.judge.loops` reads of a function is what runs only where no other submission file's import-time
    code ran first (a file imported by an earlier test can rewrite another module at import).
    """
    submission._connection.close(wait=False)  # the zygote kills the old one; waiting for it costs 0.4 s


@dataclass(frozen=True)
class OpCount:
    value: Any
    total: int
    ops: dict[str, int] = field(default_factory=dict)


def count_ops(fn: Any, *args: Any, **kwargs: Any) -> OpCount:
    """Run `fn` and count the aten operations it dispatches (for "no Python loop over T" checks)."""
    if isinstance(fn, Remote):
        fn._check_alive()
        result = fn._connection.call(fn, args, kwargs, mode="count_ops")
    else:
        result = instrument.count_ops(fn, list(args), kwargs)
    return OpCount(result["value"], int(result["total"]), dict(result["ops"]))


@dataclass(frozen=True)
class Gradients:
    value: Any
    inputs: list[torch.Tensor | None]
    parameters: dict[str, torch.Tensor | None]


def backward(
    fn: Any, *args: Any, grad_output: torch.Tensor, output_index: int | None = None, **kwargs: Any
) -> Gradients:
    """Call `fn`, backpropagate `grad_output` from its output (or output[output_index]).

    Returns the gradients of every input tensor created with requires_grad=True, in order, and of
    the parameters when `fn` is a module or one of its methods.
    """
    if isinstance(fn, Remote):
        fn._check_alive()
        result = fn._connection.call(
            fn, args, kwargs, mode="backward", grad_output=grad_output, output_index=output_index
        )
    else:
        result = instrument.backward(fn, list(args), kwargs, grad_output, output_index)
    return Gradients(result["value"], list(result["input_grads"]), dict(result["param_grads"]))


@dataclass(frozen=True)
class ModuleInfo:
    type: str
    parameters: dict[str, dict[str, Any]]
    buffers: dict[str, dict[str, Any]]
    classes: dict[str, list[str]]  # each submodule (aliases too): its class, then the classes it derives from
    training: bool

    @property
    def modules(self) -> dict[str, str]:
        """Each submodule's own class."""
        return {name: self.kind_of(name) for name in self.classes}

    def is_a(self, name: str, kind: str) -> bool:
        """Whether submodule `name` is an instance of a class named `kind` ("Dropout", "Embedding"): its own
        class or any class it derives from, so a `TokenEmbedding(nn.Embedding)` is an Embedding."""
        return any(c.endswith("." + kind) for c in self.classes.get(name, ()))

    def kind_of(self, name: str) -> str:
        """What to call submodule `name` in a message: its class, or "nothing"."""
        classes = self.classes.get(name)
        return str(classes[0]) if classes else "nothing"


def describe(module: Any) -> ModuleInfo:
    """Names, shapes and dtypes of a module's parameters, buffers and submodules."""
    if isinstance(module, Remote):
        module._check_alive()
        info = module._connection.request({"op": "describe", "target": module._handle}, {}, what=f"{module._name}")
        if not info.get("is_module"):
            raise AssertionError(f"{module._name} should be a torch.nn.Module, got {info.get('type')}")
        return ModuleInfo(info["type"], info["parameters"], info["buffers"], info["modules"], info["training"])
    persistent = set(module.state_dict(keep_vars=True))
    return ModuleInfo(
        f"{type(module).__module__}.{type(module).__qualname__}",
        {n: {"shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch."), "requires_grad": p.requires_grad}
         for n, p in module.named_parameters()},
        {n: {"shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch."), "persistent": n in persistent}
         for n, b in module.named_buffers()},
        {n: [f"{c.__module__}.{c.__qualname__}" for c in type(m).__mro__]
         for n, m in module.named_modules(remove_duplicate=False) if n},
        module.training,
    )


def load_parameters(
    module: Any,
    weights: dict[str, torch.Tensor],
    *,
    name: str,
    names_hint: str,
    allow: Sequence[str] = (),
    partial: bool = False,
) -> ModuleInfo:
    """Load `weights` into a submission's module by name, keeping the module's own buffers.

    Fails as feedback when the module lacks one of the names. Parameters the exercise does not ask
    for (a bias, say) are set to zero, unless `partial` (hand-made weights for a few layers) or named
    in `allow` (a `tril` made a parameter): the module is then judged on what it computes, and the
    extra parameters cost points in the structure tests only. They are never a reason to fail here:
    which parameters a module has is the worker's account (`describe`), and a submission that hid
    its extras from it would otherwise pass more tests than the honest one.
    """
    missing, unexpected = expect_tuple(module.load_state_dict(weights, strict=False), 2, name="load_state_dict()")
    info = describe(module)
    if unexpected:
        raise AssertionError(
            f"{name} has no parameter or buffer {unexpected[0]!r}; its parameters start "
            f"{sorted(info.parameters)[:4] or 'none'}. Hint: the grader loads weights by name: {names_hint}."
        )
    extra = [key for key in missing if key in info.parameters and key not in allow]
    if extra and not partial:
        zeros = {key: torch.zeros(info.parameters[key]["shape"], dtype=_dtype(info.parameters[key]["dtype"]))
                 for key in extra}
        module.load_state_dict(zeros, strict=False)
    return info


def _dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


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


# --- dropout, judged by what it does -----------------------------------------------------------


def uniform_causal(T: int) -> torch.Tensor:
    """(T, T) attention weights of equal scores under a causal mask: 1 / (t + 1) on positions 0..t of row t."""
    weights = torch.ones(T, T).tril()
    return weights / weights.sum(dim=-1, keepdim=True)


def explained_by_weight_dropout(run: Callable[[], Any], values: torch.Tensor, weights: torch.Tensor,
                                **how: Any) -> bool:
    """Whether `run()` (a train-mode call) gives an output that dropout on `weights` explains (see below)."""
    try:
        out = run()
    except AssertionError:
        return False
    return unexplained_by_weight_dropout(out, values, weights, **how) is None


def unexplained_by_weight_dropout(
    out: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor,
    *,
    p: float,
    groups: int,
    output_dropout: bool,
    atol: float = 1e-4,
) -> str | None:
    """Why a train-mode output is not one that dropout on the attention weights can give, or None when it is.

    `weights` (T_q, T_k) are the attention weights without dropout and `values` (B, T_k, F) the values,
    split into `groups` heads of F // groups features (every projection the identity). With inverted
    dropout on the weights, head h at (b, t) is sum_s weights[t, s] * keep[s] * values[b, s, h] / (1 - p)
    for one keep pattern in {0, 1}^T_k; with `output_dropout` each feature is then 0 or that over (1 - p).
    Every pattern is enumerated (T_k is tiny), so any correct way of dropping the weights passes (the
    contract's module, an inner one, the fused kernel's dropout_p, heads folded into the batch), and
    dropout on the values or the output instead, a missing 1 / (1 - p) or no dropout at all do not.
    """
    out = out.detach().to("cpu", torch.float64)
    values = values.detach().to("cpu", torch.float64)
    weights = weights.detach().to("cpu", torch.float64)
    B, T_k, F = values.shape
    T_q = weights.shape[0]
    if tuple(out.shape) != (B, T_q, F):
        return f"the output has shape {tuple(out.shape)}, expected {(B, T_q, F)}"
    patterns = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * T_k).reshape(-1, T_k)
    reachable = torch.einsum("ts,ps,bsf->btpf", weights, patterns, values) / (1 - p)  # (B, T_q, P, F)
    kept = reachable / (1 - p) if output_dropout else reachable
    got = out[:, :, None, :]  # (B, T_q, 1, F)
    tol = atol * (1 + kept.abs())
    match = (got - kept).abs() <= tol
    if output_dropout:
        match = match | (got.abs() <= atol)
    size = F // groups
    per_pattern = match.view(B, T_q, -1, groups, size).all(dim=-1)  # (B, T_q, P, groups)
    explained = per_pattern.any(dim=2)
    if not bool(explained.all()):
        b, t, h = (int(i) for i in torch.nonzero(~explained)[0])
        return (f"at batch element {b}, position {t}, head {h}, no dropout pattern on the attention weights"
                f"{' and the output' if output_dropout else ''} gives the output "
                f"{[round(v, 4) for v in out[b, t, h * size:(h + 1) * size].tolist()]}")
    # Dropout twice on the output is explained by keeping every weight: the weights must be seen dropped, about
    # as often as p says (a lower bound 6 standard deviations below the expected count).
    dropped = int((~per_pattern[:, :, -1]).sum())  # the last pattern keeps every key
    n = (weights != 0).sum(dim=-1).double()  # (T_q,)
    q = 1 - (1 - p) ** n - p**n  # some weight of row t dropped, not all (all dropped looks like output dropout)
    expected = float(q.sum()) * B * groups
    spread = math.sqrt(float((q * (1 - q)).sum()) * B * groups)
    if dropped < max(1.0, expected - 6 * spread):
        return (f"the attention weights were dropped in {dropped} of {B * T_q * groups} (batch element, position, "
                f"head) cases, where dropout with p = {p} drops some in about {expected:.0f}")
    return None
