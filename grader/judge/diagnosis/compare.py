"""`compare` names the known mistakes a submission makes, by comparing its facets with the reference's and theirs.

A mistake is diagnosed when the submission agrees with it on every facet of its exercise's scenarios, within a
tolerance derived from how far the float32 reference lands from its float64 golden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import torch

from grader.grade import markers
from grader.judge.checks import EPS32
from grader.judge.diagnosis.catalogue import REFERENCE, Library, Mistake, catalogue
from grader.judge.diagnosis.observe import Deferred, Facets, FacetValue, Implementation, Raised, outcome
from grader.judge.diagnosis.scenarios import SCENARIOS, run_scenario
from grader.lang import tr

TOLERANCE_FACTOR = 16.0  # as checks.tolerance: any correct float32 code errs about as much as the reference
# A mistake only counts as differing where it lands this many tolerances from the reference, so that
# correct code (within one tolerance of the reference) can never also be within one of the mistake.
SEPARATION = 4.0
MAX_NAMED = 2


def distance(a: FacetValue | Deferred, b: FacetValue | Deferred) -> float:
    """How far two facet values are apart: 0 when equal, inf when they cannot be compared."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if not a.is_floating_point():
            return 0.0 if torch.equal(a, b) else math.inf
        return _value_distance(a.double(), b.double())
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return math.inf
        return max((distance(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return math.inf
    return 0.0 if a == b else math.inf


def _value_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    infinite = a.isinf()
    if not torch.equal(a.isnan(), b.isnan()) or not torch.equal(infinite, b.isinf()):
        return math.inf  # NaN or an infinity where the other has none
    if not torch.equal(a[infinite], b[infinite]):
        return math.inf
    finite = torch.isfinite(a)
    return float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0


def tolerance(ref32: FacetValue | Deferred, golden64: FacetValue | Deferred) -> float:
    """As grader.judge.checks.tolerance, for a whole facet: 0 for facets that are not floating-point values."""
    if isinstance(ref32, torch.Tensor) and isinstance(golden64, torch.Tensor):
        if ref32.shape != golden64.shape:
            raise ValueError("the float32 and float64 references differ in shape: the scenario is broken")
        if not golden64.is_floating_point():
            return 0.0 if torch.equal(ref32, golden64) else math.inf
        a, b = ref32.double(), golden64.double()
        err = _value_distance(a, b)
        scale = max(1.0, float(b[torch.isfinite(b)].abs().max())) if torch.isfinite(b).any() else 1.0
        return max(TOLERANCE_FACTOR * err, 8 * EPS32 * scale)
    if isinstance(ref32, tuple) and isinstance(golden64, tuple) and len(ref32) == len(golden64):
        return max((tolerance(a, b) for a, b in zip(ref32, golden64, strict=True)), default=0.0)
    if isinstance(ref32, Raised):
        raise ValueError(f"the reference raised {ref32.error} in its own scenario: the scenario is broken")
    return 0.0 if ref32 == golden64 else math.inf


class ObservedMistake(NamedTuple):
    """A known mistake's facets in its exercise's scenario, and which of them differ from the reference's."""

    mistake: Mistake
    differs: tuple[str, ...]
    facets: Facets


@dataclass(frozen=True)
class KnownFacets:
    """The trusted side's half of an exercise's diagnosis: the reference and every mistake, observed."""

    reference: Facets
    tolerances: dict[str, float]
    costly: frozenset[str]
    mistakes: tuple[ObservedMistake, ...]


@cache
def known_facets(exercise: str, device: str = "cpu") -> KnownFacets | None:
    """The reference's and every known mistake's facets in `exercise`'s scenario; None without a catalogue."""
    mistakes = catalogue(exercise)
    if not mistakes:
        return None
    run = run_scenario(exercise, REFERENCE, device=device)
    reference = run.facets
    golden = run_scenario(exercise, REFERENCE, dtype=torch.float64, device=device).facets
    tolerances = {name: tolerance(reference[name], golden[name]) for name in reference}
    observed = []
    for mistake in mistakes:
        facets = run_scenario(exercise, Library({exercise: mistake.module}), device=device).facets
        differs = tuple(name for name in reference
                        if distance(facets[name], reference[name]) > SEPARATION * tolerances[name])
        observed.append(ObservedMistake(mistake, differs, facets))
    return KnownFacets(reference, tolerances, frozenset(run.costly), tuple(observed))


def match(known: KnownFacets, submission: Facets) -> tuple[Mistake, ...]:
    """The mistakes the submission agrees with on every facet; the most specific first.

    Where a mistake differs from the reference, the submission must be within one tolerance of it; elsewhere,
    where the mistake is the reference's near twin, as near to it as correct code can be. A bug of another
    kind that happens to differ from the reference as a catalogued mistake does (raising at the same call, say)
    then differs from that mistake somewhere else, and takes no name. Costly facets (a loop, by its op count)
    are computed last, only for a submission that agrees on every cheap one.
    """

    def agrees(name: str, facets: Facets, differs: tuple[str, ...]) -> bool:
        value = submission[name]
        if isinstance(value, Deferred):
            submission[name] = outcome(value.compute)
        near = 1.0 if name in differs else SEPARATION + 1.0
        return distance(submission[name], facets[name]) <= near * known.tolerances[name]

    found: list[tuple[int, Mistake]] = []
    for mistake, differs, facets in known.mistakes:
        cheap = [name for name in facets if name not in known.costly]
        names = [*sorted(cheap, key=lambda name: name not in differs), *(n for n in differs if n in known.costly)]
        if differs and all(agrees(name, facets, differs) for name in names):  # all() stops at the first miss
            found.append((len(differs), mistake))
    if not found:
        return ()
    most = max(count for count, _ in found)
    return tuple(mistake for count, mistake in found if count == most)


def diagnose(exercise: str, impl: Implementation, *, device: str = "cpu") -> tuple[Mistake, ...]:
    """The known mistakes `impl` (the submission, or a local Library) makes in `exercise`; () when none match."""
    if exercise not in SCENARIOS:
        return ()
    known = known_facets(exercise, device)
    if known is None:
        return ()
    return match(known, run_scenario(exercise, impl, device=device, lazy=True).facets)


def message(mistakes: tuple[Mistake, ...]) -> str:
    """The line appended to a failed test's feedback."""
    return "\n".join(markers.diagnosis(tr(m.diagnosis)) for m in mistakes[:MAX_NAMED])


def named(mistakes: tuple[Mistake, ...]) -> list[str]:
    """The catalogue's names of the mistakes `message` gives, for the report (`diagnosed`)."""
    return [m.name for m in mistakes[:MAX_NAMED]]
