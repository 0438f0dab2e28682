"""`tracers` holds, for each contract module that drops, the weights and inputs whose output can be read back
as a trace of its dropouts, and the judge that reads it (see `rates`, which runs them).

Each value read back is 0 (dropped) or its value without dropout times the scale of whatever dropout kept it,
so the trace shows how many were dropped at each place and by what the rest were scaled. The weights and
inputs are random, drawn for each trace: a feed-forward's hidden units are read through orthonormal columns
of w2, attention's weights are solved for from its output and its values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from grader.judge.expect import expect_tensor, hint_suffix
from grader.lang import N_, tr

BATCH, LENGTH = 16, 8
# What a trace that no dropout explains says, and no more: the dropout could not be measured, for one of two reasons.
UNREAD = N_("so its dropout could not be measured: either a dropout acts somewhere the contract has none, or the rest "
            "of forward computes something else (the other tests say what)")
VALUE_RTOL = 1e-4  # kept values are one float32 product away from their nominal value
READ_RTOL = 1e-3  # values read back through random weights: float32 sums and a solve away from their nominal
SHOWN = 0.2  # a no-dropout value under this is too small to read its ratio from
SPREAD = 6.0  # standard deviations of a binomial count within which a rate counts as p


@dataclass(frozen=True)
class Dropping:
    """What one place of dropout did in one call: how many of the values it saw it dropped."""

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

    def facet(self, p: float) -> tuple[str, ...]:
        """A plain summary for the diagnosis, for a module built with dropout p: for each dropout whether it
        drops as p says, never, or otherwise (its rate to one decimal); then the same for the scale."""
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



# --- helpers -------------------------------------------------------------------------------------


def within(site: Dropping, p: float) -> bool:
    """Whether a count of drops is one dropout with probability p gives (all but never misses)."""
    return abs(site.dropped - site.seen * p) <= SPREAD * math.sqrt(site.seen * p * (1 - p)) + 0.5


def _ratios(kind: str, ratios: torch.Tensor, site: str) -> Trace:
    """Each value over its no-dropout value: each must be 0 (dropped) or one common scale."""
    ratios = ratios.detach().double().flatten()
    if not bool(ratios.isfinite().all()):
        return Trace(kind, (), None, 1, _not_finite(site))
    dropped = ratios.abs() <= READ_RTOL
    kept = ratios[~dropped]
    if kept.numel() == 0:
        return Trace(kind, (Dropping(site, int(dropped.sum()), ratios.numel()),), None, 1)
    scale = float(kept.median())
    odd = uneven(kept, scale, site)
    if odd:
        return Trace(kind, (), scale, 1, odd)
    return Trace(kind, (Dropping(site, int(dropped.sum()), ratios.numel()),), scale, 1)


def uneven(kept: torch.Tensor, scale: float, site: str) -> str:
    """What is odd about the kept values' ratios to their no-dropout values, or '': dropout scales all it keeps
    alike, by one scale."""
    off = (kept - scale).abs() > READ_RTOL * abs(scale)
    if not bool(off.any()):
        return ""
    return tr("of its {site}, read back from its output, some came out {scale} and others {other} times their value "
              "without dropout, which no dropout gives (it scales every value it keeps alike), {unread}",
              site=tr(site), scale=f"{scale:.4f}", other=f"{float(kept[off][0]):.4f}", unread=tr(UNREAD))


def _not_finite(site: str) -> str:
    return tr("its {site} hold NaN or inf where every value is finite", site=tr(site))


def _unscaled(kind: str, weight: torch.Tensor, below: torch.Tensor, site: str) -> Trace:
    """(B, T, T) softmax weights read without a no-dropout twin: a 0 where `below` is a drop (a softmax is never
    0), and the rows with none dropped sum to the scale (1 without dropout)."""
    weight = weight.detach().double()
    if not bool(weight.isfinite().all()):
        return Trace(kind, (), None, 1, _not_finite(site))
    dropped = (weight.abs() <= READ_RTOL * float(weight.abs().max().clamp_min(1e-12))) & below
    whole = weight.sum(dim=-1)[~dropped.any(dim=-1)]
    scale = float(whole.median()) if whole.numel() else None
    return Trace(kind, (Dropping(site, int(dropped.sum()), int(below.sum()) * weight.shape[0]),), scale, 1)


def _orthonormal(rows: int, columns: int) -> torch.Tensor:
    """A random (rows, columns) float64 matrix with orthonormal columns (columns <= rows)."""
    q, r = torch.linalg.qr(torch.randn(rows, columns, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))  # the sign makes the draw uniform


# --- one tracing setup per contract module ------------------------------------------------------
# Each takes what the worker says the part is made of and returns the part's weights (loaded by name; None keeps
# its own), the names of its own tensors those weights leave alone, and `run`, which calls the part through a
# `Calls` and judges what came back. Weights and inputs are random wherever the judge can still read every
# dropout from the output, so that a traced call looks like any other call with loaded weights.


class Calls(Protocol):
    """What a setup may do with its part: call it, switch its mode, read a buffer, and use the torch it lives with."""

    torch: Any

    def __call__(self, *args: object) -> object: ...

    def mode(self, training: bool) -> None: ...

    def buffer(self, name: str) -> object: ...


Run = Callable[[Calls, bool], Trace]


@dataclass(frozen=True)
class Setup:
    weights: dict[str, torch.Tensor] | None
    allow: tuple[str, ...]
    run: Run


def _feed_forward(info: Part) -> Setup:
    d_ff, d_model = parameter_shape(info, "w1.weight", "FeedForward")
    dtype = parameter_dtype(info, "w1.weight")
    # Every hidden unit is relu of a random sum that is mostly positive. The first `width` units reach the output
    # through orthonormal columns of w2, the others through random columns orthogonal to those: the first ones are
    # read back exactly by the transpose, and no column of w2 is special to look at.
    width = min(d_ff, max(1, d_model // 2), 64)
    columns = _orthonormal(d_model, width)
    rest = torch.randn(d_model, d_ff - width, dtype=torch.float64)
    rest = (rest - columns @ (columns.T @ rest)) / math.sqrt(d_ff)
    w1 = torch.randn(d_ff, d_model, dtype=torch.float64) * (0.5 / math.sqrt(d_model))
    b1 = torch.rand(d_ff, dtype=torch.float64) + 0.5
    w2 = torch.cat([columns / math.sqrt(width), rest], dim=1)
    b2 = torch.randn(d_model, dtype=torch.float64) * 0.1
    weights = cast_weights({"w1.weight": w1, "w1.bias": b1, "w2.weight": w2, "w2.bias": b2}, dtype)
    x = torch.randn(BATCH, LENGTH, d_model).to(dtype)
    hidden = torch.relu(x.double() @ weights["w1.weight"].double().T + weights["w1.bias"].double())[..., :width]

    def run(call: Calls, training: bool) -> Trace:
        out = checked_output(call(x), what="FeedForward output", shape=(BATCH, LENGTH, d_model)).double()
        seen = (out - weights["w2.bias"].double()) @ columns * math.sqrt(width)  # (m * hidden * scale)
        shown = hidden >= SHOWN
        return _ratios("FeedForward", seen[shown] / hidden[shown], N_("hidden activations"))

    return Setup(weights, (), run)


def _residual(info: Part) -> Setup:
    (d_model,) = parameter_shape(info, "norm.weight", "ResidualConnection")
    x = torch.randn(BATCH, LENGTH, d_model).to(parameter_dtype(info, "norm.weight"))

    def run(call: Calls, training: bool) -> Trace:  # x + dropout(ones): the sublayer ignores what the norm gives
        out = checked_output(call(x, call.torch.ones_like), what="ResidualConnection output", shape=x.shape)
        return _ratios("ResidualConnection", out.double() - x.double(), N_("outputs of the sublayer"))

    return Setup(None, (), run)


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
    x = torch.randn(BATCH, min(LENGTH, max_len), d_model).to(dtype)

    def run(call: Calls, training: bool) -> Trace:  # dropout(x + pe), read against x + its own pe
        pe = checked_output(call.buffer("pe"), what="PositionalEncoding.pe", shape=(1, max_len, d_model))
        nominal = (x + pe[:, : x.shape[1]].to(x.dtype)).double()
        out = checked_output(call(x), what="PositionalEncoding output", shape=x.shape).double()
        shown = nominal.abs() >= SHOWN
        return _ratios("PositionalEncoding", out[shown] / nominal[shown], N_("values of x + pe"))

    return Setup(None, (), run)


def _head(info: Part) -> Setup:
    head_size, n_embd = parameter_shape(info, "key.weight", "HeadAttention")
    block = info.buffers.get("tril", info.parameters.get("tril", {"shape": [LENGTH]}))["shape"][0]
    dtype = parameter_dtype(info, "key.weight")
    # Each row of weights is read back from the output through the values, which needs T independent values:
    # T well under head_size and n_embd keeps them far from singular.
    T = max(1, min(LENGTH, head_size // 2, n_embd // 2, block))
    weights = cast_weights({  # small scores: every weight of a row is near 1 / (t + 1), none too small to read
        "query.weight": torch.randn(head_size, n_embd) * (0.2 / math.sqrt(n_embd)),
        "key.weight": torch.randn(head_size, n_embd) * (0.2 / math.sqrt(n_embd)),
        "value.weight": torch.randn(head_size, n_embd) / math.sqrt(n_embd),
    }, dtype)
    x = torch.randn(4 * BATCH, T, n_embd).to(dtype)
    values = x.double() @ weights["value.weight"].double().T  # (B, T, head_size)
    below = torch.ones(T, T, dtype=torch.bool).tril()

    def read(out: object) -> torch.Tensor | None:  # (B, T, T): out = weights @ values, solved for the weights
        out = checked_output(out, what="HeadAttention output", shape=(4 * BATCH, T, head_size)).double()
        weight = torch.linalg.lstsq(values.transpose(1, 2), out.transpose(1, 2)).solution.transpose(1, 2)
        if not bool((weight @ values - out).norm() <= 1e-4 * out.norm() + 1e-9):
            return None  # not a weighting of value(x): nothing to read
        return weight

    def run(call: Calls, training: bool) -> Trace:
        unread = Trace("HeadAttention", (), None, 1,
                       tr("its output is not value(x) weighted by attention weights, {unread}", unread=tr(UNREAD)))
        if not training:  # every weight of a causal row is there (a softmax is never 0), and each row sums to 1
            weight = read(call(x))
            return unread if weight is None else _unscaled("HeadAttention", weight, below, N_("attention weights"))
        call.mode(False)
        nominal = read(call(x))
        call.mode(True)
        weight = read(call(x))
        if nominal is None or weight is None:
            return unread
        return _ratios("HeadAttention", weight[:, below] / nominal[:, below], N_("attention weights"))

    return Setup(weights, ("tril",), run)
# MultiHeadAttention's setup is in `head_traces` (`rates` adds it): reading heads back takes a module of its own.
SETUPS: dict[str, Callable[[Part], Setup]] = {
    "FeedForward": _feed_forward, "ResidualConnection": _residual, "PositionalEncoding": _positional,
    "HeadAttention": _head,
}


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

