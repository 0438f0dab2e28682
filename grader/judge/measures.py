"""`measures` asks more of a call than its value, on either side alike: the aten ops it dispatches, its gradients.

A call into the submission is measured in the worker, one into the reference here, both by
`grader.inside.shared.instrument`; `fresh_worker` makes the next call start in a new worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.host.remote import Remote, RemoteSubmission
from grader.inside.shared import instrument


def fresh_worker(submission: RemoteSubmission) -> None:
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
    lines: int = 0  # lines of the submission's Python it ran (0 for the reference, counted here)


def count_ops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> OpCount:
    """Run `fn` and count the aten operations it dispatches and, in the worker, the lines of the submission's files
    it runs (for "no Python loop over T" checks)."""
    if isinstance(fn, Remote):
        fn._check_alive()
        result = fn._connection.call(fn, args, kwargs, mode="count_ops")
    else:
        result = instrument.count_ops(fn, list(args), kwargs)
    return OpCount(result["value"], int(result["total"]), dict(result["ops"]), int(result.get("lines", 0)))


@dataclass(frozen=True)
class Gradients:
    value: Any
    inputs: list[torch.Tensor | None]
    parameters: dict[str, torch.Tensor | None]


def backward(
    fn: Callable[..., Any], *args: Any, grad_output: torch.Tensor, output_index: int | None = None, **kwargs: Any
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
