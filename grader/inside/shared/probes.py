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


def on_another_device(fn: object, *args: object) -> str:
    """Call `fn` with its tensors on a device of their own, the shapes only: why it mixed devices, or ''.

    Each `{"shape": [...], "dtype": "float32"}` argument becomes a fake tensor on the "meta" device
    (torch's FakeTensorMode: shapes, dtypes and devices, no data), each module (`fn` too) is moved there; the
    rest pass as they are. Code that makes a tensor without the input's device (`torch.ones(T, T)`
    with no `device=`) then mixes the CPU with another device, as it would with CUDA inputs, and
    says so here on a machine without a GPU. Anything else fake tensors cannot run (a `.item()`, an
    output whose shape depends on the data) is no verdict: '' (the suites' other tests judge it).
    """
    from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError, FakeTensorMode

    fn, *moved = [arg.to("meta") if isinstance(arg, nn.Module) else arg for arg in (fn, *args)]
    with FakeTensorMode(allow_non_fake_inputs=True):
        real = [torch.empty(arg["shape"], dtype=getattr(torch, arg["dtype"]), device="meta")
                if isinstance(arg, dict) and "shape" in arg else arg for arg in moved]
        try:
            out = fn(*real)  # type: ignore[operator]
        except FakeTensorDeviceMismatchError as mixed:
            return str(mixed)
        except NotImplementedError:
            raise
        except Exception:  # not a device problem, and not one this probe can judge
            return ""
    for value in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            return f"it returned a tensor on {value.device} for inputs on another device"
    return ""
