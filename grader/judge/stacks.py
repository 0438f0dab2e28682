"""`stacks` holds what the encoder's and the decoder's suites share: padding masks, norms drawn apart, silenced
sublayers, and a module's parameters held to the contract's names and shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grader.host.remote import Remote
from grader.judge.expect import hint_suffix
from grader.judge.structure import describe
from grader.lang import tr

SILENCED = ("wo.weight", "w2.weight", "w2.bias")  # each sublayer's last projection


def padding_mask(lengths: Sequence[int], T: int, device: torch.device | str) -> torch.Tensor:
    """A keep mask (B, 1, 1, T): batch element b keeps its first lengths[b] positions."""
    return (torch.arange(T) < torch.tensor(lengths)[:, None]).view(len(lengths), 1, 1, T).to(device)


def randomise_norms(module: torch.nn.Module) -> None:
    """nn.LayerNorm starts at weight 1, bias 0, the same in every norm: draw them apart."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.5 * torch.randn_like(p))


def silenced(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`module`'s weights with every sublayer's last projection (`SILENCED`: wo, w2) at zero: each sublayer adds 0."""
    return {name: torch.zeros_like(p) if name.endswith(SILENCED) else p.detach()
            for name, p in module.named_parameters()}


def parameter_problems(got: dict[str, Any], expected: dict[str, Any]) -> str:
    """'' when the names and shapes agree, else what differs, a few names of each kind."""
    missing = [name for name in expected if name not in got]
    unexpected = [name for name in got if name not in expected]
    shapes = [tr("{name} {shape} (expected {expected})", name=name, shape=got[name], expected=shape)
              for name, shape in expected.items() if got.get(name, shape) != shape]
    problems = [tr("no parameter {names}", names=missing[:3]) if missing else "",
                tr("unexpected parameter(s) {names}", names=unexpected[:3]) if unexpected else "",
                tr("wrong shapes: {shapes}", shapes="; ".join(shapes[:3])) if shapes else ""]
    return ", ".join(problem for problem in problems if problem)


def expect_parameters(module: torch.nn.Module | Remote, expected: dict[str, list[int]], what: str, *,
                      hint: str) -> None:
    """Fail as feedback unless `module`'s parameters are `expected`'s, by name and shape (`what` names the module)."""
    got = {name: p["shape"] for name, p in describe(module).parameters.items()}
    problems = parameter_problems(got, expected)
    if problems:
        raise AssertionError(tr("{what} has {problems}.", what=what, problems=problems) + hint_suffix(tr(hint)))
