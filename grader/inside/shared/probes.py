"""`probes` are small trusted-written modules that tests build inside the worker and hand to a submission.

A test that must pass "a dropout" or "any callable" into student code cannot send a Python object
across the boundary; it builds one of these in the worker instead, with plain data as arguments.
"""

from __future__ import annotations

import torch
from torch import nn


class FixedMask(nn.Module):
    """A deterministic stand-in for dropout: multiplies by a fixed tensor (e.g. 0s and 2s)."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask


class Scale(nn.Module):
    """Multiplies its input by a constant: a sublayer whose effect is easy to predict."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor
