"""`expect` checks that a call gave the kind of value asked for: a tensor, a tuple of so many values."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from grader.host.failures import NotImplementedYet, SubmissionFailure
from grader.host.remote import Remote
from grader.lang import tr
from grader.markers import hint_suffix


def expect_tensor(value: Any, *, name: str) -> torch.Tensor:
    name = tr(name)  # the suites write English (grader.extract)
    if not isinstance(value, torch.Tensor):
        raise AssertionError(tr("{name} should be a torch.Tensor, got {kind}", name=name, kind=_kind(value)))
    return value


def expect_tuple(value: Any, length: int, *, name: str) -> tuple[Any, ...]:
    name = tr(name)  # the suites write English (grader.extract)
    if not isinstance(value, (tuple, list)) or len(value) != length:
        raise AssertionError(tr("{name} should return a tuple of {length} values, got {kind}", name=name, length=length,
                                kind=_kind(value)))
    return tuple(value)


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return tr("a tensor of shape {shape}", shape=tuple(value.shape))
    if isinstance(value, (tuple, list)):
        return tr("a {type} of {count} values", type=type(value).__name__, count=len(value))
    if isinstance(value, Remote):
        return repr(value)
    return tr("a {type}", type=type(value).__name__)


@contextlib.contextmanager
def hint_on_crash(hint: str) -> Iterator[None]:
    """Add a hint (English, marked N_ where written) to the message when the submission raises (its own error names
    only the symptom); unwritten code keeps its own message."""
    try:
        yield
    except NotImplementedYet:
        raise
    except SubmissionFailure as failure:
        raise SubmissionFailure(str(failure) + hint_suffix(tr(hint))) from None
