"""`tracers` holds what a dropout measurement is made of: how a round of it is drawn and read (`rates` runs the
rounds) and what the rounds add up to, a `Trace` of each place of dropout; and the rounds of the modules whose values
are read one by one, ResidualConnection and PositionalEncoding (`head_traces` has those read by least squares).

A round loads weights drawn as the contract module's own are at the start (a fresh nn.Linear's; a LayerNorm's as the
hidden tests draw theirs) and calls the part in training mode on standard normal inputs, sequences of eight positions
as the golden tests' (fewer where a reading needs fewer), with an ordinary sublayer (torch.tanh, or an nn.Linear built
in the worker), after the same call in eval mode wherever the values without dropout are not computed here: nothing a
call carries marks it as a measurement. Each value read back is 0 (dropped) or its value without dropout times the
scale of whatever dropout kept it, so the trace shows how many were dropped at each place and by what the rest were
scaled: a residual's sublayer output read against the same call in eval mode, x + pe against the module's own pe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from grader.judge.expect import expect_tensor, hint_suffix
from grader.lang import N_, tr

# What a trace that no dropout explains says, and no more: the dropout could not be measured, for one of two reasons.
UNREAD = N_("so its dropout could not be measured: either a dropout acts somewhere the contract has none, or the rest "
            "of forward computes something else (the other tests say what)")
VALUE_RTOL = 1e-4  # kept values are one float32 product away from their nominal value
READ_RTOL = 1e-3  # values read back through random weights: float32 sums and a solve away from their nominal
SHOWN = 0.2  # a no-dropout value under this is too small to read its ratio from
SPREAD = 6.0  # standard deviations of a binomial count within which a rate counts as p
# Values to read at each place of dropout: a rate of 0.1 then reads as 0.1, four standard deviations from 0.05 and
# 0.15, so that the diagnosis's facets hold still.
TARGET = 600
# Each call's shape is a function of the module's sizes alone, so that the diagnosis's runs of a known mistake and of a
# submission send the same shapes (a mistake may fail at one length and not another).
LENGTH = 8  # positions per sequence, as the golden tests' run; fewer where a reading needs them fewer
ELEMENTS = 64  # the most batch elements a call sends


@dataclass(frozen=True)
class Dropping:
    """What one place of dropout did: how many of the values read there it dropped."""

    site: str  # "hidden activations", "attention weights", ...
    dropped: int
    seen: int

    @property
    def rate(self) -> float:
        return self.dropped / self.seen if self.seen else 0.0


@dataclass(frozen=True)
class Trace:
    """A module's dropouts as read from its output: each one's count, and the scale of the kept values."""

    kind: str
    sites: tuple[Dropping, ...]
    scale: float | None  # kept outputs over their no-dropout value; None when nothing was kept
    chained: int  # how many of the dropouts a kept output passed: its scale is 1 / (1 - p) ** chained
    odd: str | None = None  # why the output is one no dropout gives, or None
    twin: Trace | None = None  # in training mode, the same calls in eval mode, where nothing drops

    @property
    def dropping(self) -> bool:
        return any(site.dropped for site in self.sites)

    def facet(self, p: float) -> tuple[str, ...]:
        """A plain summary for the diagnosis, for a module built with dropout p: for each dropout whether it
        drops as p says, never, or otherwise (its rate to one decimal); then the same for the scale. Or that it
        drops in eval mode too, or that no dropout gives its output."""
        if self.twin is not None and self.twin.dropping:
            return ("drops in eval mode",)
        if self.odd is not None:
            return ("no dropout gives this output",)

        def rate(site: Dropping) -> str:
            if site.dropped == 0:
                return "never"
            return "as p" if within(site, p) else f"{site.rate:.1f}"

        want = (1 - p) ** -self.chained
        scale = ("none kept" if self.scale is None else "as p" if abs(self.scale - want) <= 1e-3 * want
                 else f"{self.scale:.2f}")
        return (*(rate(site) for site in self.sites), scale)


def within(site: Dropping, p: float) -> bool:
    """Whether a count of drops is one dropout with probability p gives (all but never misses)."""
    return abs(site.dropped - site.seen * p) <= SPREAD * math.sqrt(site.seen * p * (1 - p)) + 0.5


def uneven(kept: torch.Tensor, scale: float, site: str) -> str:
    """What is odd about the kept values' ratios to their no-dropout values, or '': dropout scales all it keeps
    alike, by one scale."""
    off = (kept - scale).abs() > READ_RTOL * abs(scale)
    if not bool(off.any()):
        return ""
    return tr("of its {site}, read back from its output, some came out {scale} and others {other} times their value "
              "without dropout, which no dropout gives (it scales every value it keeps alike), {unread}",
              site=tr(site), scale=f"{scale:.4f}", other=f"{float(kept[off][0]):.4f}", unread=tr(UNREAD))


# --- what the rounds add up to ------------------------------------------------------------------------


class Reading:
    """What a part's outputs in one mode said over the rounds: how many values each place of dropout dropped of
    those read, the kept ones over their value without dropout, and why no dropout explains them (or None)."""

    def __init__(self, kind: str, chained: int) -> None:
        self.kind, self.chained = kind, chained
        self.counts: dict[str, list[int]] = {}
        self.kept: list[torch.Tensor] = []
        self.even = ""  # the place whose kept values must share one scale ("": what is kept is not a ratio)
        self.odd: str | None = None

    def fail(self, why: str) -> None:
        self.odd = self.odd or why

    def count(self, site: str, dropped: int, seen: int) -> None:
        counts = self.counts.setdefault(site, [0, 0])
        counts[0] += dropped
        counts[1] += seen

    def keep(self, values: torch.Tensor, site: str = "") -> None:
        self.kept.append(values.detach().double().flatten())
        self.even = site or self.even

    def ratios(self, site: str, ratios: torch.Tensor) -> None:
        """Values over their no-dropout value: each must be 0 (dropped) or one common scale."""
        ratios = ratios.detach().double().flatten()
        if not bool(ratios.isfinite().all()):
            self.fail(tr("its {site} hold NaN or inf where every value is finite", site=tr(site)))
            return
        dropped = ratios.abs() <= READ_RTOL
        self.count(site, int(dropped.sum()), ratios.numel())
        self.keep(ratios[~dropped], site)

    @property
    def seen(self) -> int:
        return min((seen for _, seen in self.counts.values()), default=0)

    def trace(self, twin: Trace | None = None) -> Trace:
        if self.odd is not None:
            return Trace(self.kind, (), None, self.chained, self.odd, twin)
        kept = torch.cat(self.kept) if self.kept else torch.zeros(0, dtype=torch.float64)
        scale = float(kept.median()) if kept.numel() else None
        if self.even and scale is not None and (odd := uneven(kept, scale, self.even)):
            return Trace(self.kind, (), scale, self.chained, odd, twin)
        sites = tuple(Dropping(site, dropped, seen) for site, (dropped, seen) in self.counts.items() if seen)
        return Trace(self.kind, sites, scale, self.chained, None, twin)


class Tally:
    """A part's readings over the rounds: its calls in training mode, and the same calls in eval mode."""

    def __init__(self, kind: str, chained: int) -> None:
        self.trained, self.evaluated = Reading(kind, chained), Reading(kind, chained)

    def trace(self, training: bool) -> Trace:
        return self.trained.trace(self.evaluated.trace()) if training else self.evaluated.trace()


# --- drawing a round -------------------------------------------------------------------------------------------


class Calls(Protocol):
    """What a round may do with its part: call it, read a buffer, and use the torch it lives with."""

    torch: Any

    def __call__(self, *args: object) -> object: ...

    def buffer(self, name: str) -> object: ...


@dataclass(frozen=True)
class Draw:
    """One round of a part: the weights loaded for it (None keeps its own), its call, and the reading of what came
    back from the call in eval mode (None in training mode where the setup needs no twin) and in training mode (None
    when the module is measured in eval mode)."""

    weights: dict[str, torch.Tensor] | None
    call: Callable[[Calls], object]
    read: Callable[[object | None, object | None, Tally], None]


@dataclass(frozen=True)
class Setup:
    """How a part is measured: its kind, how many dropouts a kept value passed, the names of its own tensors the
    weights leave alone, a fresh round's draw, and whether its reading in training mode needs the same call in eval
    mode (where the values without dropout are not computed here)."""

    kind: str
    chained: int
    allow: tuple[str, ...]
    draw: Callable[[], Draw]
    twin: bool = True


def linear(fan_in: int, fan_out: int, *, bias: bool = True) -> dict[str, torch.Tensor]:
    """Weights by name drawn as a fresh nn.Linear(fan_in, fan_out) draws its own (its reset_parameters: weight and
    bias uniform within 1 / sqrt(fan_in)): as the contract module starts, and as the reference the other tests load."""
    bound = 1 / math.sqrt(fan_in)
    drawn = {"weight": torch.empty(fan_out, fan_in).uniform_(-bound, bound)}
    if bias:
        drawn["bias"] = torch.empty(fan_out).uniform_(-bound, bound)
    return drawn


# --- one setup per contract module -----------------------------------------------------------------------------


def _residual(info: Part) -> Setup:
    (d_model,) = parameter_shape(info, "norm.weight", "ResidualConnection")
    dtype = parameter_dtype(info, "norm.weight")
    site = N_("outputs of the sublayer")

    def draw() -> Draw:
        weights = cast_weights({"norm.weight": 1 + 0.5 * torch.randn(d_model), "norm.bias": 0.5 * torch.randn(d_model)},
                               dtype)  # as the hidden tests draw a norm's, so that its place shows
        layer = linear(d_model, d_model) if bool(torch.rand(()) < 0.5) else None  # else torch.tanh
        x = torch.randn(math.ceil(TARGET / (0.6 * LENGTH * d_model)), LENGTH, d_model).to(dtype)  # 3 in 4 shown
        normed = F.layer_norm(x.double(), (d_model,), weights["norm.weight"].double(), weights["norm.bias"].double())
        nominal = torch.tanh(normed) if layer is None else normed @ layer["weight"].double().T + layer["bias"].double()
        shown = nominal.abs() >= SHOWN  # read where the sublayer's output is not too small (whatever the norm does)
        made: list[object] = []

        def call(part: Calls) -> object:
            if not made:  # one sublayer for both calls
                made.append(_sublayer(part.torch, layer, dtype))
            return part(x, made[0])

        def read(evaluated: object | None, trained: object | None, tally: Tally) -> None:
            # x + dropout(sublayer(norm(x))): what the sublayer added in eval mode is its value without dropout
            added = checked_output(evaluated, what="ResidualConnection output", shape=x.shape).double() - x.double()
            tally.evaluated.count(site, int((shown & (added == 0)).sum()), int(shown.sum()))
            if trained is not None:
                out = checked_output(trained, what="ResidualConnection output", shape=x.shape).double()
                use = shown & (added != 0)
                tally.trained.ratios(site, (out - x.double())[use] / added[use])

        return Draw(weights, call, read)

    return Setup("ResidualConnection", 1, (), draw)


def _sublayer(torch_there: Any, layer: dict[str, torch.Tensor] | None, dtype: torch.dtype) -> object:
    """An ordinary sublayer, built where the module lives: torch.tanh, or an nn.Linear holding `layer`'s weights."""
    if layer is None:
        return torch_there.tanh
    out_features, in_features = layer["weight"].shape
    built = torch_there.nn.Linear(in_features, out_features)
    if dtype != torch.float32:  # nn.Linear's own
        built.to(dtype)
    built.load_state_dict(cast_weights(layer, dtype))
    return built


def _positional(info: Part) -> Setup:
    if "pe" not in info.buffers:
        raise AssertionError(tr("PositionalEncoding has no buffer pe (buffers: {names})",
                                names=sorted(info.buffers)[:4]))
    if len(info.buffers["pe"]["shape"]) != 3:
        raise AssertionError(tr("PositionalEncoding.pe has shape {shape}, expected (1, max_len, d_model).",
                                shape=info.buffers["pe"]["shape"])
                             + hint_suffix(tr("register pe.unsqueeze(0) as the buffer.")))
    _, max_len, d_model = info.buffers["pe"]["shape"]
    dtype = getattr(torch, str(info.buffers["pe"]["dtype"]), torch.float32)
    site = N_("values of x + pe")

    def draw() -> Draw:
        T = min(LENGTH, max_len)
        x = torch.randn(math.ceil(TARGET / (0.6 * T * d_model)), T, d_model).to(dtype)  # 3 in 4 shown
        pe: list[torch.Tensor] = []

        def call(part: Calls) -> object:
            if not pe:
                pe.append(checked_output(part.buffer("pe"), what="PositionalEncoding.pe", shape=(1, max_len, d_model)))
            return part(x)

        def read(evaluated: object | None, trained: object | None, tally: Tally) -> None:  # dropout(x + pe), own pe
            nominal = (x + pe[0][:, :T].to(x.dtype)).double()
            shown = nominal.abs() >= SHOWN
            for out, reading in ((evaluated, tally.evaluated), (trained, tally.trained)):
                if out is not None:
                    out = checked_output(out, what="PositionalEncoding output", shape=x.shape).double()
                    reading.ratios(site, out[shown] / nominal[shown])

        return Draw(None, call, read)

    return Setup("PositionalEncoding", 1, (), draw, twin=False)


SETUPS: dict[str, Callable[[Part], Setup]] = {"ResidualConnection": _residual, "PositionalEncoding": _positional}
# The setups read by least squares (FeedForward, HeadAttention, MultiHeadAttention) are in `head_traces`.


@dataclass(frozen=True)
class Part:
    """What `describe` says a part is made of (a claim: a lie only makes the weights fail to load)."""

    parameters: dict[str, dict[str, Any]]
    buffers: dict[str, dict[str, Any]]
    n_heads: object


def checked_output(value: object, *, what: str, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    what = tr(what)  # the suites write English (grader.extract)
    out = expect_tensor(value, name=what).detach()
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(tr("{name} has shape {shape}, expected {expected}", name=what, shape=tuple(out.shape),
                                expected=tuple(shape)))
    return out


def cast_weights(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {name: w.to(dtype) for name, w in weights.items()}


def parameter_shape(info: Part, name: str, kind: str) -> list[int]:
    if name not in info.parameters:
        raise AssertionError(tr("{kind} has no parameter {name} (parameters: {names}).", kind=kind, name=name,
                                names=sorted(info.parameters)[:4])
                             + hint_suffix(tr("use the attribute names of the docstring.")))
    return list(info.parameters[name]["shape"])


def parameter_dtype(info: Part, name: str) -> torch.dtype:
    dtype = getattr(torch, str(info.parameters[name]["dtype"]), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32
