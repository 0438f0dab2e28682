"""`compare` names the known mistakes a submission makes, by comparing its facets with the reference's and theirs.

A mistake is diagnosed when the submission agrees with it on every facet of its exercise's scenarios, within a
tolerance derived from how far the float32 reference lands from its float64 golden.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import NamedTuple

import torch

from grader import markers
from grader.judge.checks import EPS32
from grader.judge.diagnosis import stored
from grader.judge.diagnosis.catalogue import REFERENCE, Library, Mistake, catalogue, combination
from grader.judge.diagnosis.observe import Deferred, Facets, FacetValue, Implementation, Raised, outcome
from grader.judge.diagnosis.scenarios import SCENARIOS, run_scenario
from grader.lang import tr

TOLERANCE_FACTOR = 16.0  # as checks.tolerance: any correct float32 code errs about as much as the reference
# A mistake only counts as differing where it lands this many tolerances from the reference, so that
# correct code (within one tolerance of the reference) can never also be within one of the mistake.
SEPARATION = 4.0
MAX_NAMED = 2
MAX_PAIRS = 5  # the pairs of known mistakes a diagnosis observes at most, the likeliest first


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
    exercise: str = ""  # where two mistakes at once are looked for (`pair`); "" for none
    device: str = "cpu"


@cache
def known_facets(exercise: str, device: str = "cpu") -> KnownFacets | None:
    """The reference's and every known mistake's facets in `exercise`'s scenario; None without a catalogue."""
    mistakes = catalogue(exercise)
    if not mistakes:
        return None
    kept = stored.load(exercise, device)
    if kept is not None and [name for name, _, _ in kept["mistakes"]] == [m.name for m in mistakes]:
        observed = tuple(ObservedMistake(mistake, tuple(differs), facets)
                         for mistake, (_, differs, facets) in zip(mistakes, kept["mistakes"], strict=True))
        return KnownFacets(kept["reference"], kept["tolerances"], frozenset(kept["costly"]), observed, exercise,
                           device)
    run = run_scenario(exercise, REFERENCE, device=device)
    reference = run.facets
    golden = run_scenario(exercise, REFERENCE, dtype=torch.float64, device=device).facets
    tolerances = {name: tolerance(reference[name], golden[name]) for name in reference}
    known = KnownFacets(reference, tolerances, frozenset(run.costly), (), exercise, device)
    known = replace(known, mistakes=tuple(_observe(known, mistake) for mistake in mistakes))
    stored.save(exercise, device, {"reference": known.reference, "tolerances": known.tolerances,
                                   "costly": sorted(known.costly),
                                   "mistakes": [[m.mistake.name, list(m.differs), m.facets] for m in known.mistakes]})
    return known


def _observe(known: KnownFacets, mistake: Mistake) -> ObservedMistake:
    facets = run_scenario(known.exercise, Library({known.exercise: mistake.module}), device=known.device).facets
    differs = tuple(name for name in known.reference
                    if distance(facets[name], known.reference[name]) > SEPARATION * known.tolerances[name])
    return ObservedMistake(mistake, differs, facets)


@cache
def pair(exercise: str, device: str, first: str, second: str) -> ObservedMistake | None:
    """Two known mistakes made at once (`catalogue.combination`), observed; None where they are not independent."""
    known, both = known_facets(exercise, device), combination(exercise, first, second)
    return None if known is None or both is None else _observe(known, both)


def match(known: KnownFacets, submission: Facets) -> tuple[Mistake, ...]:
    """The mistakes the submission agrees with on every facet; the most specific first.

    Where a mistake differs from the reference, the submission must be within one tolerance of it; elsewhere,
    where the mistake is the reference's near twin, as near to it as correct code can be. A bug of another
    kind that happens to differ from the reference as a catalogued mistake does (raising at the same call, say)
    then differs from that mistake somewhere else, and takes no name. Costly facets (a loop, by its op count)
    are computed last, only for a submission that agrees on every cheap one. Where no one mistake explains every
    facet, two made at once may (`two_at_once`).
    """
    return _agreeing(known, submission, known.mistakes) or two_at_once(known, submission)


def _agreeing(known: KnownFacets, submission: Facets, observed: Iterable[ObservedMistake]) -> tuple[Mistake, ...]:
    found: list[tuple[int, Mistake]] = []
    for mistake, differs, facets in observed:
        cheap = [name for name in facets if name not in known.costly]
        names = [*sorted(cheap, key=lambda name: name not in differs), *(n for n in differs if n in known.costly)]
        if differs and all(_agrees(known, submission, name, facets[name], 1.0 if name in differs else SEPARATION + 1.0)
                           for name in names):  # all() stops at the first miss
            found.append((len(differs), mistake))
    if not found:
        return ()
    most = max(count for count, _ in found)
    return tuple(mistake for count, mistake in found if count == most)


def _agrees(known: KnownFacets, submission: Facets, name: str, value: FacetValue | Deferred, near: float) -> bool:
    """Whether the submission's facet `name` is within `near` tolerances of `value` (a Deferred one computed now)."""
    if isinstance(submission[name], Deferred):
        submission[name] = outcome(submission[name].compute)
    return distance(submission[name], value) <= near * known.tolerances[name]


def two_at_once(known: KnownFacets, submission: Facets) -> tuple[Mistake, ...]:
    """Two known mistakes made at once, named where the submission agrees on every facet with both made together.

    Only pairs whose evidence shows are observed (a scenario run each, once per process): where neither mistake
    differs from the reference, the submission agrees with the reference; where one or both do, it does not. Pairs
    where the submission also agrees with each mistake wherever only that one differs come first; the others only
    if none of those agrees. Where several pairs agree, only the mistakes they all share are named."""
    if not known.exercise:
        return ()
    cheap = [name for name in known.reference if name not in known.costly]
    loose = SEPARATION + 1.0
    near_reference = {name: _agrees(known, submission, name, known.reference[name], loose) for name in cheap}
    like = {m.mistake.name: {name: _agrees(known, submission, name, m.facets[name], loose) for name in m.differs
                             if name not in known.costly} for m in known.mistakes}
    ranked: list[tuple[int, float, str, str]] = []
    for a, b in itertools.combinations(known.mistakes, 2):
        differs = set(a.differs) | set(b.differs)
        shown = {name: like[a.mistake.name].get(name, False) or like[b.mistake.name].get(name, False)
                 for name in differs if name in near_reference}
        if not all(near_reference[name] if name not in differs else not near_reference[name] or shown[name]
                   for name in cheap):
            continue
        alone = [like[m.mistake.name][name] for m, other in ((a, b), (b, a)) for name in m.differs
                 if name in near_reference and name not in other.differs]
        misfit = sum(0.0 if shown[name] else _misfit(submission[name], a.facets[name], b.facets[name],
                                                         known.reference[name]) for name in shown)
        ranked.append((0 if all(alone) else 1, misfit, a.mistake.name, b.mistake.name))
    observed = [both for *_, a, b in sorted(ranked)[:MAX_PAIRS]
                if (both := pair(known.exercise, known.device, a, b)) is not None]
    found = [set(m.name.split("+")) for m in _agreeing(known, submission, observed)]
    shared = set.intersection(*found) if found else set()
    return tuple(m.mistake for m in known.mistakes if m.mistake.name in shared)


def _misfit(value: FacetValue | Deferred, a: FacetValue | Deferred, b: FacetValue | Deferred,
            reference: FacetValue | Deferred) -> float:
    """How far a facet is from two mistakes' effects added (`a + b - reference`), relative to its own distance from
    the reference: near 0 where they add up, 1 where nothing can be told (no numbers, or nothing close)."""
    if isinstance(value, tuple) and all(isinstance(x, tuple) and len(x) == len(value) for x in (a, b, reference)):
        return max((_misfit(*parts) for parts in zip(value, a, b, reference, strict=True)), default=0.0)
    tensors = (value, a, b, reference)
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.shape == value.shape for t in tensors):
        return 1.0
    off = distance(value, reference)
    if off == 0.0:
        return 0.0
    added = a.double() + b.double() - reference.double()
    return min(1.0, distance(value.double(), added) / off) if math.isfinite(off) else 1.0


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
