"""`diagnosis` names a known mistake when an exercise fails, by comparing behaviours on fixed probes.

Each exercise has a probe: fixed inputs (seeded) and the calls a test would make. The probe runs once
on the submission (in the worker) and, in this trusted process, on the reference and on every
known-wrong implementation of the catalogue, `solutions/mistakes/<exercise>/<name>.py`. Each run yields
facets: outputs, structure (parameters and buffers), exceptions, op-count growth. A mistake is
diagnosed when the submission agrees with it on every facet where it differs from the reference,
within a tolerance derived from how far the float32 reference lands from its float64 golden.
Where no catalogue is installed (the student release) there is simply no diagnosis.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import math
import re
import sys
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from grader.host.failures import NotImplementedYet, SubmissionFailure, WorkerCrash
from grader.host.remote import Remote
from grader.inside.shared import probes as kit_probes
from grader.judge.checks import EPS32, count_ops, describe, manual_seed

SEED = 1234
TOLERANCE_FACTOR = 16.0  # as checks.tolerance: any correct float32 code errs about as much as the reference
# A mistake only counts as differing where it lands this many tolerances from the reference, so that
# correct code (within one tolerance of the reference) can never also be within one of the mistake.
SEPARATION = 4.0
MAX_NAMED = 2


@dataclass(frozen=True)
class Mistake:
    """One known-wrong implementation of an exercise, and what to tell a student who made it."""

    exercise: str
    name: str
    diagnosis: str
    module: types.ModuleType


@dataclass(frozen=True)
class Raised:
    """A facet whose computation raised: only the exception's type is compared."""

    error: str


@dataclass
class Deferred:
    """A costly facet of the submission, computed on first use."""

    compute: Callable[[], Any]


Facets = dict[str, Any]


# --- the catalogue -------------------------------------------------------------------------------


def mistakes_folder() -> Path | None:
    """solutions/mistakes/, or None where the reference solutions are not installed."""
    spec = importlib.util.find_spec("solutions")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "mistakes"
    return folder if folder.is_dir() else None


def load_variant(path: Path, *, exercise: str) -> types.ModuleType:
    """Import a whole alternative `<exercise>.py` in this process, its relative imports bound to solutions/.

    Variants are written as student files (`from .config import ModelArgs`); loaded as a module of the
    `solutions` package, they build on the reference for every other exercise.
    """
    importlib.import_module("solutions")
    name = f"solutions._variant_{exercise}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "solutions"
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def diagnosis_text(path: Path) -> str:
    """The file's module-level DIAGNOSIS string, read without running the file."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DIAGNOSIS"]:
            value = ast.literal_eval(node.value)
            if isinstance(value, str) and value.strip():
                return value.strip()
    raise ValueError(f"{path} has no DIAGNOSIS = '...' string")


@cache
def catalogue(exercise: str) -> tuple[Mistake, ...]:
    folder = mistakes_folder()
    if folder is None:
        return ()
    return tuple(
        Mistake(exercise, path.stem, diagnosis_text(path), load_variant(path, exercise=exercise))
        for path in sorted((folder / exercise).glob("*.py"))
    )


class Library:
    """The kit's modules by name, as `ref` gives them: solutions/, with one exercise swapped for a variant."""

    def __init__(self, swapped: dict[str, types.ModuleType] | None = None) -> None:
        self._swapped = swapped or {}

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._swapped:
            return self._swapped[name]
        if name == "torch":
            return torch
        if name == "probes":
            return kit_probes
        return importlib.import_module(f"solutions.{name}")


REFERENCE = Library()


# --- running a probe ---------------------------------------------------------------------------


@dataclass
class Run:
    """One run of a probe on one side: `lib` is the submission (`impl`) or a `Library`."""

    lib: Any
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    lazy: bool = False  # leave costly facets as Deferred, for `match` to compute only if it must
    facets: Facets = field(default_factory=dict)
    costly: set[str] = field(default_factory=set)
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(SEED))

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator).to(self.device, self.dtype)

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

    def seeded(self, compute: Callable[[], Any]) -> Any:
        """`compute()` with this side's torch seeded, as every side draws the same random numbers;
        the worker's own random state is put back afterwards."""
        local = isinstance(self.lib, Library)
        state = None if local else self.lib.torch.get_rng_state()
        (manual_seed if local else self.lib.torch.manual_seed)(SEED)
        try:
            return compute()
        finally:
            if state is not None:
                self.lib.torch.set_rng_state(state)

    def record(self, name: str, compute: Callable[[], Any], *, costly: bool = False) -> None:
        if costly:
            self.costly.add(name)
        self.facets[name] = Deferred(compute) if costly and self.lazy else outcome(compute)

    def module(self, key: str, make: Callable[[Any], Any]) -> Any:
        """`make(lib)` with the reference's weights (perturbed, so no LayerNorm is the identity), in eval mode.

        Parameters the reference lacks (a bias it does not ask for) get fixed values too, the same on
        every side; buffers stay the module's own. Records the module's structure; None if it failed.
        """
        built = outcome(lambda: _build(self.lib, key, make, self.device, self.dtype), plain=False)
        if isinstance(built, Raised):
            self.facets[f"{key}: structure"] = built
            return None
        self.facets[f"{key}: structure"] = built[1]
        return built[0]


def outcome(compute: Callable[[], Any], *, plain: bool = True) -> Any:
    """The plain value of `compute()`, or Raised(type) when it raised; a stub or a crash ends the probe."""
    try:
        value = compute()
        return _plain(value) if plain else value
    except (NotImplementedYet, WorkerCrash):
        raise
    except SubmissionFailure as failure:
        found = re.search(r" raised (\w+)", str(failure))
        return Raised(found.group(1) if found else "SubmissionFailure")
    except Exception as error:
        return Raised(type(error).__name__)


def _build(lib: Any, key: str, make: Callable[[Any], Any], device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    m = make(lib)
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


def _reference_weights(key: str, make: Callable[[Any], Any]) -> tuple[dict[str, torch.Tensor], frozenset[str]]:
    if key not in _WEIGHTS:
        _WEIGHTS[key] = _perturbed_reference(make)
    return _WEIGHTS[key]


def _perturbed_reference(make: Callable[[Any], Any]) -> tuple[dict[str, torch.Tensor], frozenset[str]]:
    with torch.random.fork_rng(devices=[]):
        manual_seed(SEED)
        reference = make(REFERENCE)
    weights = {n: (p.detach() + _filler(n, list(p.shape))).contiguous() for n, p in reference.named_parameters()}
    return weights, frozenset(reference.state_dict())


def _filler(name: str, shape: list[int]) -> torch.Tensor:
    return 0.1 * torch.randn(*shape, generator=torch.Generator().manual_seed(zlib.crc32(name.encode())))


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (Remote, torch.nn.Module)):
        return "<object>"
    if value is None or isinstance(value, (bool, int, float, str, Raised)):
        return value
    return f"<{type(value).__name__}>"


def _swap(m: Any, name: str, sub: Any) -> Any:
    m.add_module(name, sub)
    return m


def _dtypes(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return str(value.dtype)
    if isinstance(value, (tuple, list)):
        return tuple(_dtypes(v) for v in value)
    return _plain(value)


def _nonzero(value: Any) -> Any:
    return value != 0 if isinstance(value, torch.Tensor) else value


def _additive(mask: Any) -> Any:
    """An additive mask as (blocked, the values where not blocked): -1e9 blocks as well as -inf."""
    if not isinstance(mask, torch.Tensor) or not mask.is_floating_point():
        return _plain(mask)
    blocked = mask <= -1e9
    return blocked, mask.masked_fill(blocked, 0.0)


def _refused(build: Callable[[], Any]) -> str:
    result = outcome(build)
    return "refused" if isinstance(result, Raised) and result.error in ("ValueError", "AssertionError") else "built"


def _op_growth(fn: Any, short: torch.Tensor, long: torch.Tensor) -> str:
    if isinstance(fn, Remote):  # counted by the worker, as the suite's vectorisation test counts
        at_short, at_long = count_ops(fn, short).total, count_ops(fn, long).total
    else:
        at_short, at_long = _torch_calls(fn, short), _torch_calls(fn, long)
    return "grows with T" if at_long > at_short + 4 else "constant"  # the margin the suite allows


def _torch_calls(fn: Callable[..., Any], *args: Any) -> int:
    """How many torch functions `fn` calls: trusted code's loops show as well as in aten ops, and the
    aten counter would cost this process seconds on first use, where the worker has paid it already."""
    calls = 0

    class CountCalls(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return func(*args, **(kwargs or {}))

    with CountCalls():
        fn(*args)
    return calls


# --- the probes ----------------------------------------------------------------------------------


def probe_attention(run: Run) -> None:
    def attention(*args: Any, **kwargs: Any) -> Any:
        return run.lib.attention.attention(*args, **kwargs)

    q, k, v = run.randn(2, 3, 5, 8), run.randn(2, 3, 7, 8), run.randn(2, 3, 7, 4)
    mask, keep = run.keep_mask(2, 1, 5, 7), run.dropout_mask(2, 3, 5, 7)
    run.record("batch and heads", lambda: attention(q, k, v))
    run.record("no leading dims", lambda: attention(q[0, 0], k[0, 0], v[0, 0]))
    run.record("keep mask", lambda: attention(q, k, v, mask=mask))
    run.record("fixed dropout", lambda: attention(q, k, v, dropout=run.lib.probes.FixedMask(keep)))
    run.record("large scores", lambda: attention(q * 100, k * 100, v))
    run.record("float64 dtypes", lambda: _dtypes(attention(q.double(), k.double(), v.double())))


def probe_masking(run: Run) -> None:
    x, short, long = run.randn(2, 6, 3), run.randn(1, 4, 2), run.randn(1, 32, 2)
    w = run.randn(2, 5, 5)
    w[:, 2, 1], w[:, 4, 0] = 0.0, 0.0  # genuine scores of 0 must not be blocked
    run.record("causal_average", lambda: run.lib.masking.causal_average(x))
    run.record("causal_average float64", lambda: _dtypes(run.lib.masking.causal_average(x.double())))
    # Costly: the worker's first op count takes seconds, unless the suite's own count has warmed it.
    run.record("causal_average op growth", lambda: _op_growth(run.lib.masking.causal_average, short, long), costly=True)
    run.record("weight_mask_and_normalization", lambda: run.lib.masking.weight_mask_and_normalization(w))
    run.record("weight_mask_and_normalization 2D", lambda: run.lib.masking.weight_mask_and_normalization(w[0]))
    run.record("create_look_ahead_mask", lambda: _nonzero(run.lib.masking.create_look_ahead_mask(5)))
    run.record("causal_mask", lambda: _additive(run.lib.masking.causal_mask(5)))


def probe_head_attention(run: Run) -> None:
    m = run.module("HeadAttention", lambda lib: lib.head_attention.HeadAttention(12, 4, 8, 0.0))
    full, short, keep = run.randn(2, 8, 12), run.randn(2, 5, 12), run.dropout_mask(2, 5, 5)
    run.record("T = block_size", lambda: m(full))
    run.record("T < block_size", lambda: m(short))
    run.record("fixed dropout", lambda: _swap(m, "dropout", run.lib.probes.FixedMask(keep))(short))


def probe_multi_head_attention(run: Run) -> None:
    def mha(lib: Any, is_causal: bool, dim: int = 16, n_heads: int = 4) -> Any:
        args = lib.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=0.0, max_seq_len=8)
        return lib.multi_head_attention.MultiHeadAttention(args, is_causal=is_causal)

    run.record("dim 10, 4 heads", lambda: _refused(lambda: mha(run.lib, False, dim=10)))
    plain = run.module("MultiHeadAttention", lambda lib: mha(lib, False))
    causal = run.module("MultiHeadAttention causal", lambda lib: mha(lib, True))
    x, q, kv = run.randn(2, 5, 16), run.randn(2, 3, 16), run.randn(2, 6, 16)
    pad, on_weights, on_output = run.padding(2, 5), run.dropout_mask(2, 4, 5, 5), run.dropout_mask(2, 5, 16)
    run.record("self-attention", lambda: plain(x, x, x))
    run.record("cross-attention", lambda: plain(q, kv, kv))
    run.record("padding mask", lambda: plain(x, x, x, pad))
    run.record("causal", lambda: causal(x, x, x))
    run.record("causal and padding mask", lambda: causal(x, x, x, pad))
    dropped = run.module("MultiHeadAttention", lambda lib: mha(lib, False))

    def with_fixed_dropout() -> Any:
        dropped.add_module("attn_dropout", run.lib.probes.FixedMask(on_weights))
        dropped.add_module("resid_dropout", run.lib.probes.FixedMask(on_output))
        return dropped(x, x, x)

    run.record("fixed dropout", with_fixed_dropout)


def probe_positional_encoding(run: Run) -> None:
    m = run.module("PositionalEncoding", lambda lib: lib.positional_encoding.PositionalEncoding(6, 10, 0.0))
    dropping = run.module("PositionalEncoding", lambda lib: lib.positional_encoding.PositionalEncoding(6, 10, 0.5))
    x = run.randn(2, 4, 6)
    run.record("output", lambda: m(x))
    # The suite lets F.dropout stand for self.dropout here, so no fixed stand-in: real dropout, same seed.
    run.record("training mode, seeded dropout", lambda: run.seeded(lambda: dropping.train()(x)))


def probe_sublayers(run: Run) -> None:
    ff = run.module("FeedForward", lambda lib: lib.sublayers.FeedForward(6, 10, 0.0))
    rc = run.module("ResidualConnection", lambda lib: lib.sublayers.ResidualConnection(6, 0.0))
    sublayer = run.module("sublayer", lambda lib: lib.torch.nn.Linear(6, 6))  # mixes features, unlike a scale
    x, hidden, keep = run.randn(2, 4, 6), run.dropout_mask(2, 4, 10), run.dropout_mask(2, 4, 6)
    run.record("FeedForward", lambda: ff(x))
    run.record("FeedForward, fixed dropout", lambda: _swap(ff, "dropout", run.lib.probes.FixedMask(hidden))(x))
    run.record("ResidualConnection", lambda: rc(x, sublayer))
    run.record("ResidualConnection, fixed dropout",
               lambda: _swap(rc, "dropout", run.lib.probes.FixedMask(keep))(x, sublayer))


def probe_encoder(run: Run) -> None:
    m = run.module("Encoder", lambda lib: lib.encoder.Encoder(2, 8, 2, 12, 0.0))
    x, pad = run.randn(2, 5, 8), run.padding(2, 5)
    run.record("output", lambda: m(x))
    run.record("padding mask", lambda: m(x, pad))


def probe_decoder(run: Run) -> None:
    m = run.module("Decoder", lambda lib: lib.decoder.Decoder(2, 8, 2, 12, 0.0, 8))
    x, memory = run.randn(2, 5, 8), run.randn(2, 6, 8)
    src, tgt = run.padding(2, 6), run.padding(2, 5)
    run.record("output", lambda: m(x, memory))
    run.record("src_mask", lambda: m(x, memory, src, None))
    run.record("tgt_mask", lambda: m(x, memory, None, tgt))
    run.record("both masks", lambda: m(x, memory, src, tgt))


def probe_transformer(run: Run) -> None:
    def make(lib: Any) -> Any:
        return lib.transformer.Transformer(11, 13, d_model=16, n_heads=2, n_layers=1, d_ff=16, dropout=0.0,
                                           max_seq_len=16)

    m = run.module("Transformer", make)
    src, tgt, src_mask = run.tokens(11, 2, 6), run.tokens(13, 2, 5), run.padding(2, 6)
    run.record("logits", lambda: m(src, tgt))
    run.record("logits with src_mask", lambda: m(src, tgt, src_mask))
    run.record("greedy_decode", lambda: run.lib.transformer.greedy_decode(m, src, 8, 1))


PROBES: dict[str, Callable[[Run], None]] = {
    "attention": probe_attention,
    "masking": probe_masking,
    "head_attention": probe_head_attention,
    "multi_head_attention": probe_multi_head_attention,
    "positional_encoding": probe_positional_encoding,
    "sublayers": probe_sublayers,
    "encoder": probe_encoder,
    "decoder": probe_decoder,
    "transformer": probe_transformer,
}


def probe(exercise: str, lib: Any, *, dtype: torch.dtype = torch.float32, device: str = "cpu",
          lazy: bool = False) -> Run:
    run = Run(lib, dtype, device, lazy)
    with torch.random.fork_rng(devices=[]):
        manual_seed(SEED)
        PROBES[exercise](run)
    return run


# --- comparing facets ------------------------------------------------------------------------------


def distance(a: Any, b: Any) -> float:
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


def tolerance(ref32: Any, golden64: Any) -> float:
    """As grader.judge.checks.tolerance, for a whole facet: 0 for facets that are not floating-point values."""
    if isinstance(ref32, torch.Tensor) and isinstance(golden64, torch.Tensor):
        if ref32.shape != golden64.shape:
            raise ValueError("the float32 and float64 references differ in shape: the probe is broken")
        if not golden64.is_floating_point():
            return 0.0 if torch.equal(ref32, golden64) else math.inf
        a, b = ref32.double(), golden64.double()
        err = _value_distance(a, b)
        scale = max(1.0, float(b[torch.isfinite(b)].abs().max())) if torch.isfinite(b).any() else 1.0
        return max(TOLERANCE_FACTOR * err, 8 * EPS32 * scale)
    if isinstance(ref32, tuple) and isinstance(golden64, tuple) and len(ref32) == len(golden64):
        return max((tolerance(a, b) for a, b in zip(ref32, golden64, strict=True)), default=0.0)
    if isinstance(ref32, Raised):
        raise ValueError(f"the reference raised {ref32.error} in its own probe: the probe is broken")
    return 0.0 if ref32 == golden64 else math.inf


@dataclass(frozen=True)
class Known:
    """The trusted side's half of an exercise's diagnosis: the reference and every mistake, probed."""

    reference: Facets
    tolerances: dict[str, float]
    costly: frozenset[str]
    mistakes: tuple[tuple[Mistake, tuple[str, ...], Facets], ...]  # each with the facets where it differs


@cache
def known(exercise: str, device: str = "cpu") -> Known | None:
    mistakes = catalogue(exercise)
    if not mistakes:
        return None
    run = probe(exercise, REFERENCE, device=device)
    reference = run.facets
    golden = probe(exercise, REFERENCE, dtype=torch.float64, device=device).facets
    tolerances = {name: tolerance(reference[name], golden[name]) for name in reference}
    probed = []
    for mistake in mistakes:
        facets = probe(exercise, Library({exercise: mistake.module}), device=device).facets
        differs = tuple(name for name in reference
                        if distance(facets[name], reference[name]) > SEPARATION * tolerances[name])
        probed.append((mistake, differs, facets))
    return Known(reference, tolerances, frozenset(run.costly), tuple(probed))


def match(known: Known, submission: Facets) -> tuple[Mistake, ...]:
    """The mistakes the submission agrees with wherever they differ from the reference; the most specific first.

    A mistake seen only in a costly facet (a loop, by its op count) must also agree on every cheap one,
    so that the costly facet is computed only for a submission that is otherwise right.
    """

    def agrees(name: str, facets: Facets) -> bool:
        if isinstance(submission[name], Deferred):
            submission[name] = outcome(submission[name].compute)
        return distance(submission[name], facets[name]) <= known.tolerances[name]

    found: list[tuple[int, Mistake]] = []
    for mistake, differs, facets in known.mistakes:
        costly = [name for name in differs if name in known.costly]
        names = [*(name for name in facets if name not in known.costly), *costly] if costly else differs
        if differs and all(agrees(name, facets) for name in names):  # cheap facets first: all() stops early
            found.append((len(differs), mistake))
    if not found:
        return ()
    most = max(count for count, _ in found)
    return tuple(mistake for count, mistake in found if count == most)


def diagnose(exercise: str, lib: Any, *, device: str = "cpu") -> tuple[Mistake, ...]:
    """The known mistakes `lib` (the submission, or a local Library) makes in `exercise`; () when none match."""
    if exercise not in PROBES:
        return ()
    trusted = known(exercise, device)
    if trusted is None:
        return ()
    return match(trusted, probe(exercise, lib, device=device, lazy=True).facets)


def message(mistakes: tuple[Mistake, ...]) -> str:
    """The line appended to a failed test's feedback."""
    return "\n".join(f"Diagnosis: {m.diagnosis}" for m in mistakes[:MAX_NAMED])
