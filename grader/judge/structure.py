"""`structure` reads what a module is made of (parameters, buffers, submodules) and loads weights into it by name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grader.host.remote import Remote
from grader.inside.shared.instrument import names_by_tensor
from grader.judge.expect import expect_tuple, hint_suffix
from grader.lang import tr


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
        return str(classes[0]) if classes else tr("nothing")


def describe(module: torch.nn.Module | Remote) -> ModuleInfo:
    """Names, shapes and dtypes of a module's parameters, buffers and submodules.

    A parameter reachable by several names (`self.net = nn.Sequential(...)` and `self.w1 = self.net[0]`)
    is listed once, under its most contract-like name (`by_name`), with the others as "aliases".
    """
    if isinstance(module, Remote):
        module._check_alive()
        info = module._connection.request({"op": "describe", "target": module._resolved()._handle}, {},
                                          what=f"{module._name}")
        if not info.get("is_module"):
            raise AssertionError(tr("{name} should be a torch.nn.Module, got {type}", name=module._name,
                                    type=info.get("type")))
        return ModuleInfo(info["type"], by_name(info["parameters"]), info["buffers"], info["modules"], info["training"])
    persistent = set(module.state_dict(keep_vars=True))
    return ModuleInfo(
        f"{type(module).__module__}.{type(module).__qualname__}",
        by_name({names[0]: {"shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch."),
                            "requires_grad": p.requires_grad, "names": names} for p, names in names_by_tensor(module)}),
        {n: {"shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch."), "persistent": n in persistent}
         for n, b in module.named_buffers()},
        {n: [f"{c.__module__}.{c.__qualname__}" for c in type(m).__mro__]
         for n, m in module.named_modules(remove_duplicate=False) if n},
        module.training,
    )


# The contract's attribute names (docs/contract.md), and the tensors' own: a name made of these is the contract's.
CONTRACT_NAMES = frozenset({
    "key", "query", "value", "tril", "dropout", "wq", "wk", "wv", "wo", "attn_dropout", "resid_dropout", "mask",
    "pe", "w1", "w2", "norm", "self_attn", "cross_attn", "feed_forward", "residual1", "residual2", "residual3",
    "layers", "src_embed", "tgt_embed", "pos", "encoder", "decoder", "generator", "weight", "bias",
})


def by_name(parameters: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each parameter under its most contract-like name: of its names ("names", registration order), the one
    with the fewest parts outside the contract (`w1.weight` over `net.0.weight`, `wq.weight` over
    `proj.q.weight`; `layers.0` is the contract's ModuleList), the first registered of those; the others
    become "aliases"."""
    def foreign(name: str) -> int:
        parts = name.split(".")
        return sum(not (part in CONTRACT_NAMES or (part.isdigit() and i > 0 and parts[i - 1] == "layers"))
                   for i, part in enumerate(parts))

    listed: dict[str, dict[str, Any]] = {}
    for first, info in parameters.items():
        claimed = info.get("names") if isinstance(info, dict) else None  # the worker's word: a list of str, or not
        names = [n for n in claimed if isinstance(n, str)] if isinstance(claimed, list) else []
        names = names or [first]
        name = names[0] if len(names) == 1 else min(names, key=foreign)
        listed[name] = {**info, "aliases": [n for n in names if n != name]}
    return listed


def load_parameters(
    module: torch.nn.Module | Remote,
    weights: dict[str, torch.Tensor],
    *,
    name: str,
    names_hint: str,
    allow: Sequence[str] = (),
    partial: bool = False,
) -> None:
    """Load `weights` into a submission's module by name, keeping the module's own buffers.

    Fails as feedback when the module lacks one of the names. Parameters the exercise does not ask
    for (a bias, say) are set to zero, unless `partial` (hand-made weights for a few layers) or named
    in `allow` (a `tril` made a parameter): the module is then judged on what it computes, and the
    extra parameters cost points in the structure tests only. They are never a reason to fail here:
    which parameters a module has is the worker's account (`describe`), and a submission that hid
    its extras from it would otherwise pass more tests than the honest one. That account is asked for
    only when a name was refused or some were left out (parameters to zero, or buffers): half the time,
    every name loaded and none was left, there is nothing to look up.
    """
    names_hint = tr(names_hint)  # the suites write English
    missing, unexpected = expect_tuple(module.load_state_dict(weights, strict=False), 2, name="load_state_dict()")
    if not unexpected and (partial or not missing):
        return
    info = describe(module)
    if unexpected:
        raise AssertionError(
            tr("{name} has no parameter or buffer {key}; its parameters start {names}.", name=name,
               key=repr(unexpected[0]), names=sorted(info.parameters)[:4] or tr("none"))
            + hint_suffix(tr("the grader loads weights by name: {names}.", names=names_hint))
        )
    # a parameter is loaded when any of its names is (an alias shares its weights)
    extra = [key for key in missing if key in info.parameters and key not in allow
             and not any(alias in weights for alias in info.parameters[key]["aliases"])]
    if extra and not partial:
        zeros = {key: torch.zeros(info.parameters[key]["shape"], dtype=_dtype(info.parameters[key]["dtype"]))
                 for key in extra}
        module.load_state_dict(zeros, strict=False)


def _dtype(name: object) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


def expect_structure(module: torch.nn.Module | Remote, reference: torch.nn.Module, *, what: str, hint: str,
                     any_size: tuple[str, ...] = ()) -> None:
    """Fail as feedback unless `module` has the reference's parameters and buffers, by name and shape.

    Extra buffers pass (a cached mask changes nothing); extra parameters do not: they are weights the
    contract does not ask for. Buffers named in `any_size` may have any shape (a table the contract
    leaves the length of).
    """
    what, hint = tr(what), tr(hint)  # the suites write English (grader.extract)
    got, want = describe(module), describe(reference)
    problems = []
    for kind, have, need, extra_ok in (("parameter", got.parameters, want.parameters, False),
                                       ("buffer", got.buffers, want.buffers, True)):
        missing = [name for name in need if name not in have]
        unexpected = [] if extra_ok else [name for name in have if name not in need]
        shapes = [tr("{name} {shape} (expected {expected})", name=name, shape=have[name]["shape"],
                     expected=shape["shape"]) for name, shape in need.items()
                  if name in have and have[name]["shape"] != shape["shape"] and name not in any_size]
        parameters = kind == "parameter"
        problems += [(tr("no parameter {names}", names=missing[:3]) if parameters
                      else tr("no buffer {names}", names=missing[:3])) if missing else "",
                     tr("unexpected parameter(s) {names}", names=unexpected[:3]) if unexpected else "",
                     (tr("parameter shapes differ: {shapes}", shapes="; ".join(shapes[:2])) if parameters
                      else tr("buffer shapes differ: {shapes}", shapes="; ".join(shapes[:2]))) if shapes else ""]
    found = ", ".join(problem for problem in problems if problem)
    if found:
        raise AssertionError(tr("{what} differs from the contract's: {found}.", what=what, found=found)
                             + hint_suffix(hint))
