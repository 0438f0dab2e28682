"""`probes` are small trusted-written modules that tests build inside the worker and hand to a submission.

A test that must pass "a dropout" or "any callable" into student code cannot send a Python object
across the boundary; it builds one of these in the worker instead, with plain data as arguments.
"""

from __future__ import annotations

import torch
from torch import nn


class FixedMask(nn.Module):
    """A deterministic stand-in for dropout: multiplies by a fixed tensor (e.g. 0s and 2s).

    It looks like the nn.Dropout it replaces: `p` (the share of the mask that drops) and `inplace`, so that code
    reading `self.dropout.p` for its own `F.dropout` runs; the tests then judge that code by its rates.
    """

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask)
        self.p = float((mask == 0).float().mean()) if mask.numel() else 0.0
        self.inplace = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask


class Scale(nn.Module):
    """Multiplies its input by a constant: a sublayer whose effect is easy to predict."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


class SelfAttending(nn.Module):
    """The contract's sublayer `lambda y: attention(y, y, y, mask)`, built in the worker for a test to hand over."""

    def __init__(self, attention: nn.Module, mask: torch.Tensor | None = None) -> None:
        super().__init__()
        self.attention, self.mask = attention, mask

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.attention(y, y, y, self.mask)


class CrossAttending(nn.Module):
    """The contract's sublayer `lambda y: attention(y, memory, memory, mask)`."""

    def __init__(self, attention: nn.Module, memory: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        super().__init__()
        self.attention, self.memory, self.mask = attention, memory, mask

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.attention(y, self.memory, self.memory, self.mask)


class CallLog(nn.Module):
    """Calls `model` as it is called and keeps, per call, the shape of its first argument and whether a cache came
    with it: how a generate loop drives a model (the prompt once, then one token per call). Any other attribute is
    the model's."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.calls: list[list[object]] = []

    def forward(self, idx: torch.Tensor, *args: object, **kwargs: object) -> object:
        cache = args[0] if args else kwargs.get("cache")
        self.calls.append([list(idx.shape), cache is not None])
        return self.model(idx, *args, **kwargs)

    def __getattr__(self, name: str) -> object:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("model"), name)


def swap(module: nn.Module, replacements: dict[str, nn.Module]) -> nn.Module:
    """Set each named submodule of `module` to its replacement (a FixedMask for `dropout`), and with it every
    other name the same submodule has in the tree: `self.net = nn.Sequential(..., self.dropout, ...)` calls
    the dropout through the Sequential. A submodule that two names share, each with its own replacement
    (`self.attn_dropout = self.resid_dropout`), is replaced under those two names only. Returns `module`."""
    olds = {name: getattr(module, name, None) for name in replacements}
    by_old: dict[int, list[nn.Module]] = {}
    for name, old in olds.items():
        if isinstance(old, nn.Module):
            by_old.setdefault(id(old), []).append(replacements[name])
    parents = [m for _, m in module.named_modules()]
    for parent in parents:
        for child_name, child in list(parent._modules.items()):
            new = by_old.get(id(child))
            if new is not None and len({id(n) for n in new}) == 1:
                parent._modules[child_name] = new[0]
    for name, replacement in replacements.items():
        module.add_module(name, replacement)
    return module


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

