"""`instrument` asks more of a call than its value: the aten operations it dispatches, its gradients.

Used on both sides of the boundary: by the worker for the submission (this file is staged into the
sandbox, so it imports only torch) and by `testing` for the reference, so both are measured alike.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def count_ops(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], *,
              lines_in: tuple[str, ...] = ()) -> dict[str, Any]:
    """{"value": fn(...), "ops": {aten op name: count}, "total": count, "lines": count}: the aten operations the call
    dispatches, and the lines of Python it runs in files under the folders `lines_in` (the submission's).

    Together they are every way a call can work once per position: a torch operation each time, or Python code of
    the submission's each time (work on Python lists dispatches nothing, and code Python or torch calls unseen, a
    module's forward or extra_repr, runs lines all the same)."""
    counts: Counter[str] = Counter()
    lines = 0

    def in_submission(frame: Any, event: str, arg: Any) -> Any:
        return count_line if frame.f_code.co_filename.startswith(lines_in) else None

    def count_line(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return count_line

    class CountOps(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # Nothing is compiled here: keeping torch.compile out of __torch_dispatch__ would import
            # torch._dynamo at the first count, a second of a worker's time.
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            counts[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))

    before = sys.gettrace()
    if lines_in:
        sys.settrace(in_submission)
    try:
        with CountOps():
            value = fn(*args, **kwargs)
    finally:
        if lines_in:
            sys.settrace(before)
    return {"value": value, "ops": dict(counts), "total": sum(counts.values()), "lines": lines}


def backward(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], grad_output: torch.Tensor,
    output_index: int | None,
) -> dict[str, Any]:
    """Call `fn`, backpropagate `grad_output` from its output (or output[output_index]).

    Returns the value, the gradients of the input tensors that require grad (in order), and those
    of the parameters when `fn` is a module or one of its bound methods.
    """
    module = module_of(fn)
    # every name of each parameter, aliases too: the trusted side looks gradients up by the contract's names
    parameters = dict(module.named_parameters(remove_duplicate=False)) if module is not None else {}
    for p in parameters.values():
        p.grad = None
    leaves = [t for t in tensors_in((args, kwargs)) if t.requires_grad]
    for leaf in leaves:
        leaf.grad = None
    value = fn(*args, **kwargs)
    output = value if output_index is None else value[output_index]
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"expected a tensor to differentiate, got {type(output).__name__}")
    # Same gradients as output.backward(grad_output), bit for bit, but an explicit gradient tensor
    # makes torch import its symbolic-shape machinery (sympy, 0.4 s) on first use.
    (output * grad_output).sum().backward()
    return {
        "value": value,
        "input_grads": [leaf.grad for leaf in leaves],
        "param_grads": {name: p.grad for name, p in parameters.items()},
    }


def names_by_tensor(module: torch.nn.Module) -> list[tuple[torch.nn.Parameter, list[str]]]:
    """Each parameter of `module` once, with every name it has, in registration order (`self.w1 = self.net[0]`
    gives net.0.weight and w1.weight one tensor)."""
    grouped: dict[int, tuple[torch.nn.Parameter, list[str]]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        grouped.setdefault(id(p), (p, []))[1].append(name)
    return list(grouped.values())


def module_of(fn: Callable[..., Any]) -> torch.nn.Module | None:
    """The module `fn` is, or whose bound method it is; None for anything else."""
    module = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    return module if isinstance(module, torch.nn.Module) else None


def tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []
