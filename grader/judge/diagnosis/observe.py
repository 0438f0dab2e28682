"""`observe` runs a scenario on one implementation (the submission, or a `Library` here) and records its facets.

A scenario draws its inputs from a seeded generator, builds modules with the reference's weights, and
records each call's outcome as a facet: a plain value (tensors on the CPU, tuples, numbers, strings),
or `Raised` when the call raised. Costly facets may be left `Deferred`, computed only if a match needs them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

import torch

from grader.host.failures import NotImplementedYet, SubmissionFailure, WorkerCrash
from grader.host.remote import Remote, RemoteSubmission
from grader.judge.checks import describe, manual_seed
from grader.judge.diagnosis.catalogue import REFERENCE, Library

SEED = 1234

T = TypeVar("T")


@dataclass(frozen=True)
class Raised:
    """A facet whose computation raised: only the exception's type is compared."""

    error: str


@dataclass
class Deferred:
    """A costly facet of the submission, computed on first use."""

    compute: Callable[[], object]


# The exercises' modules by name: the submission in the worker (`impl`), or the reference here, maybe with a mistake.
Implementation: TypeAlias = "Library | RemoteSubmission"
Built: TypeAlias = "torch.nn.Module | Remote"  # a module a scenario built, here or in the worker
FacetValue: TypeAlias = "torch.Tensor | tuple[FacetValue, ...] | bool | int | float | str | Raised | None"
Facets: TypeAlias = "dict[str, FacetValue | Deferred]"  # by facet name, as the scenario records them


@dataclass
class ScenarioRun:
    """One run of an exercise's scenario on one implementation: its inputs, the modules it builds, its facets."""

    impl: Implementation
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    lazy: bool = False  # leave costly facets as Deferred, for `match` to compute only if it must
    facets: Facets = field(default_factory=dict)
    costly: set[str] = field(default_factory=set)
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(SEED))

    def randn(self, *shape: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Standard normal inputs in the run's dtype, or in `dtype` (a float64 facet stays float64 in every run)."""
        return torch.randn(*shape, generator=self.generator).to(self.device, dtype or self.dtype)

    def tokens(self, high: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=self.generator).to(self.device)

    def dropout_mask(self, *shape: int) -> torch.Tensor:
        """A fixed stand-in for dropout's pattern: 0s and 2s."""
        return ((torch.rand(*shape, generator=self.generator) > 0.3).to(self.dtype) * 2.0).to(self.device)

    def keep_mask(self, *shape: int) -> torch.Tensor:
        """A random boolean keep mask in which every row keeps key 0."""
        mask = torch.rand(*shape, generator=self.generator) < 0.6
        mask[..., 0] = True
        return mask.to(self.device)

    def padding(self, batch: int, keys: int) -> torch.Tensor:
        """A padding keep mask (B, 1, 1, T): each batch element keeps its first 2..T-1 keys."""
        lengths = torch.randint(2, keys, (batch, 1), generator=self.generator)
        return (torch.arange(keys) < lengths).view(batch, 1, 1, keys).to(self.device)

    def seeded(self, compute: Callable[[], T]) -> T:
        """`compute()` with this side's torch seeded, as every side draws the same random numbers;
        the worker's own random state is put back afterwards."""
        local = isinstance(self.impl, Library)
        state = None if local else self.impl.torch.get_rng_state()
        (manual_seed if local else self.impl.torch.manual_seed)(SEED)
        try:
            return compute()
        finally:
            if state is not None:
                self.impl.torch.set_rng_state(state)

    def record(self, name: str, compute: Callable[[], object], *, costly: bool = False) -> None:
        if costly:
            self.costly.add(name)
        self.facets[name] = Deferred(compute) if costly and self.lazy else outcome(compute)

    def module(self, key: str, make: Callable[[Implementation], Built], *, dtype: torch.dtype | None = None
               ) -> Built | None:
        """`make(impl)` with the reference's weights (perturbed, so no LayerNorm is the identity), in eval mode,
        in the run's dtype or in `dtype`.

        Parameters the reference lacks (a bias it does not ask for) get fixed values too, the same on
        every side; buffers stay the module's own. Records the module's structure; None if it failed, so
        that each facet using it records what using None raises, on every side alike.
        """
        built = attempt(lambda: _build(self.impl, key, make, self.device, dtype or self.dtype))
        label = f"{key}: structure" if dtype is None else f"{key} in {str(dtype).removeprefix('torch.')}: structure"
        if isinstance(built, Raised):
            self.facets[label] = built
            return None
        self.facets[label] = built[1]
        return built[0]


def attempt(compute: Callable[[], T]) -> T | Raised:
    """`compute()`, or Raised(type) when it raised; a stub or a crash ends the scenario."""
    try:
        return compute()
    except (NotImplementedYet, WorkerCrash):
        raise
    except SubmissionFailure as failure:  # by the type the worker named, never by its words, which are translated
        return Raised(failure.kind or "SubmissionFailure")
    except Exception as error:
        return Raised(type(error).__name__)


def outcome(compute: Callable[[], object]) -> FacetValue:
    """The plain value of `compute()` as a facet, or Raised(type) when it raised."""
    return attempt(lambda: plain(compute()))


def plain(value: object) -> FacetValue:
    """`value` as a facet: tensors detached on the CPU, sequences as tuples, objects by a placeholder."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (tuple, list)):
        return tuple(plain(v) for v in value)
    if isinstance(value, (Remote, torch.nn.Module)):
        return "<object>"
    if value is None or isinstance(value, (bool, int, float, str, Raised)):
        return value
    return f"<{type(value).__name__}>"


def _build(impl: Implementation, key: str, make: Callable[[Implementation], Built], device: str,
           dtype: torch.dtype) -> tuple[Built, FacetValue]:
    m = make(impl)
    info = describe(m)
    structure = (
        tuple(sorted((n, tuple(p["shape"]), p["dtype"]) for n, p in info.parameters.items())),
        tuple(sorted((n, tuple(b["shape"]), b["dtype"], b["persistent"]) for n, b in info.buffers.items())),
    )
    weights, reference_names = _reference_weights(key, make)
    extra = {n: _filler(n, p["shape"]) for n, p in info.parameters.items() if n not in reference_names}
    m.load_state_dict({**weights, **extra}, strict=False)
    m.to(device)
    if dtype != torch.float32:
        m.to(dtype)
    m.eval()
    return m, structure


_WEIGHTS: dict[str, tuple[dict[str, torch.Tensor], frozenset[str]]] = {}


def _reference_weights(key: str, make: Callable[[Implementation], Built]
                       ) -> tuple[dict[str, torch.Tensor], frozenset[str]]:
    if key not in _WEIGHTS:
        _WEIGHTS[key] = _perturbed_reference(make)
    return _WEIGHTS[key]


def _perturbed_reference(make: Callable[[Implementation], Built]) -> tuple[dict[str, torch.Tensor], frozenset[str]]:
    with torch.random.fork_rng(devices=[]):
        manual_seed(SEED)
        reference = make(REFERENCE)
    weights = {n: (p.detach() + _filler(n, list(p.shape))).contiguous() for n, p in reference.named_parameters()}
    return weights, frozenset(reference.state_dict())


def _filler(name: str, shape: list[int]) -> torch.Tensor:
    return 0.1 * torch.randn(*shape, generator=torch.Generator().manual_seed(zlib.crc32(name.encode())))
