"""`claims` decides when a failure's evidence is unique to one cause, so that a hint may name it.

A hint that says the output "matches" some mistake is a diagnosis: it is made only where the output agrees
with that one cause of the test's own list and with no other (two causes the probe cannot tell apart, such
as embeddings left unscaled and embeddings scaled after a LayerNorm-hidden sum, are never named). A
gradient that is wrong only along whole rows or columns, left at zero, points at a frozen row; an error
scattered over the tensor points at a detached or in-place computation. A kit test reads every claim a
graded run makes against the mistake really made (tests/kit/test_catalogue_grading.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import torch

from grader.lang import N_, tr

Cause = TypeVar("Cause", bound=Hashable)

FROZEN = {
    "rows": N_("the gradient of {name} is 0 on whole rows {indices} and right everywhere else: a frozen row, as "
               "padding_idx, a mask or requires_grad=False makes one; every row the forward pass uses gets its "
               "gradient."),
    "columns": N_("the gradient of {name} is 0 on whole columns {indices} and right everywhere else: a frozen "
                  "column, as a mask or requires_grad=False makes one; every feature the forward pass uses gets its "
                  "gradient."),
}


def only_match(output: torch.Tensor, causes: Mapping[Cause, torch.Tensor], *, atol: float) -> Cause | None:
    """The one cause whose output `output` agrees with within `atol`; None where none does, or several do."""
    found = [cause for cause, wrong in causes.items()
             if tuple(output.shape) == tuple(wrong.shape)
             and torch.allclose(output.detach().double().cpu(), wrong.detach().double().cpu(), rtol=0.0, atol=atol)]
    return found[0] if len(found) == 1 else None


def zero_lines(got: torch.Tensor, want: torch.Tensor, *, atol: float) -> tuple[int, list[int]] | None:
    """Where `got` differs from `want` only on whole rows (dim 0) or columns (dim -1) that it holds at exactly
    zero and `want` does not: (that dim, their indices); None for a 1-D tensor, an error elsewhere, or every
    line at zero (the whole tensor, which says nothing of one row)."""
    if got.dim() < 2 or tuple(got.shape) != tuple(want.shape):
        return None
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    off = (got - want).abs() > atol
    if not off.any():
        return None
    for dim in (0, got.dim() - 1):
        other = tuple(d for d in range(got.dim()) if d != dim)
        zero = (got == 0).all(dim=other) & (want.abs() > atol).any(dim=other)
        lines = zero.nonzero().flatten().tolist()
        shape = [1] * got.dim()
        shape[dim] = -1
        if lines and len(lines) < got.size(dim) and not (off & ~zero.view(shape)).any():
            return dim, lines
    return None


def gradient_hint(got: torch.Tensor, want: torch.Tensor, *, atol: float, name: str, scattered: str) -> str:
    """The hint for a wrong gradient of `name`, from the pattern of its error: whole rows or columns at zero name a
    frozen row; anything else gets `scattered` (English, translated here), the detach / no_grad / in-place hint."""
    pattern = zero_lines(got, want, atol=atol)
    if pattern is None:
        return tr(scattered)
    dim, lines = pattern
    return tr(FROZEN["rows" if dim == 0 else "columns"], name=name, indices=lines[:5])
