"""`expect` checks that a call gave the kind of value asked for: a tensor, a tuple of so many values."""

from __future__ import annotations

from typing import Any

import torch

from grader.host.remote import Remote


def expect_tensor(value: Any, *, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {_kind(value)}")
    return value


def expect_tuple(value: Any, length: int, *, name: str) -> tuple[Any, ...]:
    if not isinstance(value, (tuple, list)) or len(value) != length:
        raise AssertionError(f"{name} should return a tuple of {length} values, got {_kind(value)}")
    return tuple(value)


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values"
    if isinstance(value, Remote):
        return repr(value)
    return f"a {type(value).__name__}"
