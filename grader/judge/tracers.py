"""`tracers` holds, for each contract module that drops, the weights and inputs that turn its output into a
trace of its dropouts, and the judge that reads the trace (see `rates`, which runs them).

Every traced output is 0 (dropped) or a known value times the scale of whatever dropout kept it, so the
trace shows how many were dropped at each place and by what the rest were scaled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from grader.judge.expect import expect_tensor

BATCH, LENGTH = 16, 8
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
    """One call of a module with tracing weights: each dropout's count, and the scale of the kept outputs."""

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
        return Trace(kind, (), None, 1, f"its {site} hold NaN or inf where every value is finite")
    dropped = ratios.abs() <= READ_RTOL
    kept = ratios[~dropped]
    if kept.numel() == 0:
        return Trace(kind, (Dropping(site, int(dropped.sum()), ratios.numel()),), None, 1)
    scale = float(kept.median())
    off = (kept - scale).abs() > READ_RTOL * abs(scale)
    if bool(off.any()):
        return Trace(kind, (), scale, 1, f"of its {site}, those it kept came out {scale:.4f} and "
                                         f"{float(kept[off][0]):.4f} times their value without dropout: dropout "
                                         "scales every value it keeps alike")
    return Trace(kind, (Dropping(site, int(dropped.sum()), ratios.numel()),), scale, 1)


def _unscaled(kind: str, weight: torch.Tensor, below: torch.Tensor, site: str) -> Trace:
    """(B, T, T) softmax weights read without a no-dropout twin: a 0 where `below` is a drop (a softmax is never
    0), and the rows with none dropped sum to the scale (1 without dropout)."""
    weight = weight.detach().double()
    if not bool(weight.isfinite().all()):
        return Trace(kind, (), None, 1, f"its {site} hold NaN or inf where every value is finite")
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
    d_ff, d_model = _shape(info, "w1.weight", "FeedForward")
    dtype = _dtype(info, "w1.weight")
    width = min(d_model, d_ff)
    # Every hidden unit is relu of a random sum that is mostly positive; w2 maps the first `width` units out
    # through orthonormal columns (read back exactly by its transpose) and has no use for the others, whose
    # dropout cannot be seen when d_ff > d_model (the one pattern a submission could look for).
    columns = _orthonormal(d_model, width)
    w1 = torch.randn(d_ff, d_model, dtype=torch.float64) * (0.5 / math.sqrt(d_model))
    b1 = torch.rand(d_ff, dtype=torch.float64) + 0.5
    w2 = torch.zeros(d_model, d_ff, dtype=torch.float64)
    w2[:, :width] = columns / math.sqrt(width)
    b2 = torch.randn(d_model, dtype=torch.float64) * 0.1
    weights = _cast({"w1.weight": w1, "w1.bias": b1, "w2.weight": w2, "w2.bias": b2}, dtype)
    x = torch.randn(BATCH, LENGTH, d_model).to(dtype)
    hidden = torch.relu(x.double() @ weights["w1.weight"].double().T + weights["w1.bias"].double())[..., :width]

    def run(call: Calls, training: bool) -> Trace:
        out = _output(call(x), what="FeedForward output", shape=(BATCH, LENGTH, d_model)).double()
        seen = (out - weights["w2.bias"].double()) @ columns * math.sqrt(width)  # (m * hidden * scale)
        shown = hidden >= SHOWN
        return _ratios("FeedForward", seen[shown] / hidden[shown], "hidden activations")

    return Setup(weights, (), run)


def _residual(info: Part) -> Setup:
    (d_model,) = _shape(info, "norm.weight", "ResidualConnection")
    x = torch.randn(BATCH, LENGTH, d_model).to(_dtype(info, "norm.weight"))

    def run(call: Calls, training: bool) -> Trace:  # x + dropout(ones): the sublayer ignores what the norm gives
        out = _output(call(x, call.torch.ones_like), what="ResidualConnection output", shape=x.shape)
        return _ratios("ResidualConnection", out.double() - x.double(), "outputs of the sublayer")

    return Setup(None, (), run)


def _positional(info: Part) -> Setup:
    if "pe" not in info.buffers:
        raise AssertionError(f"PositionalEncoding has no buffer pe (buffers: {sorted(info.buffers)[:4]})")
    if len(info.buffers["pe"]["shape"]) != 3:
        raise AssertionError(f"PositionalEncoding.pe has shape {info.buffers['pe']['shape']}, expected (1, max_len, "
                             "d_model). Hint: register pe.unsqueeze(0) as the buffer.")
    _, max_len, d_model = info.buffers["pe"]["shape"]
    dtype = getattr(torch, str(info.buffers["pe"]["dtype"]), torch.float32)
    x = torch.randn(BATCH, min(LENGTH, max_len), d_model).to(dtype)

    def run(call: Calls, training: bool) -> Trace:  # dropout(x + pe), read against x + its own pe
        pe = _output(call.buffer("pe"), what="PositionalEncoding.pe", shape=(1, max_len, d_model))
        nominal = (x + pe[:, : x.shape[1]].to(x.dtype)).double()
        out = _output(call(x), what="PositionalEncoding output", shape=x.shape).double()
        shown = nominal.abs() >= SHOWN
        return _ratios("PositionalEncoding", out[shown] / nominal[shown], "values of x + pe")

    return Setup(None, (), run)


def _head(info: Part) -> Setup:
    head_size, n_embd = _shape(info, "key.weight", "HeadAttention")
    block = info.buffers.get("tril", info.parameters.get("tril", {"shape": [LENGTH]}))["shape"][0]
    dtype = _dtype(info, "key.weight")
    # Each row of weights is read back from the output through the values, which needs T independent values:
    # T well under head_size and n_embd keeps them far from singular.
    T = max(1, min(LENGTH, head_size // 2, n_embd // 2, block))
    weights = _cast({  # small scores: every weight of a row is near 1 / (t + 1), none too small to read
        "query.weight": torch.randn(head_size, n_embd) * (0.2 / math.sqrt(n_embd)),
        "key.weight": torch.randn(head_size, n_embd) * (0.2 / math.sqrt(n_embd)),
        "value.weight": torch.randn(head_size, n_embd) / math.sqrt(n_embd),
    }, dtype)
    x = torch.randn(4 * BATCH, T, n_embd).to(dtype)
    values = x.double() @ weights["value.weight"].double().T  # (B, T, head_size)
    below = torch.ones(T, T, dtype=torch.bool).tril()

    def read(out: object) -> torch.Tensor:  # (B, T, T): out = weights @ values, solved for the weights
        out = _output(out, what="HeadAttention output", shape=(4 * BATCH, T, head_size)).double()
        return torch.linalg.lstsq(values.transpose(1, 2), out.transpose(1, 2)).solution.transpose(1, 2)

    def run(call: Calls, training: bool) -> Trace:
        if not training:  # every weight of a causal row is there (a softmax is never 0), and each row sums to 1
            weight = read(call(x))
            return _unscaled("HeadAttention", weight, below, "attention weights")
        call.mode(False)
        nominal = read(call(x))
        call.mode(True)
        weight = read(call(x))
        return _ratios("HeadAttention", weight[:, below] / nominal[:, below], "attention weights")

    return Setup(weights, ("tril",), run)
def _multi_head(info: Part) -> Setup:
    # Still the tracing weights (ones and identities, equal scores), which a module can recognise: with random
    # weights the output dropout hides the weights of a row whenever it drops most of its outputs, and which
    # rows can be read then depends on the dropout being measured.
    dim, _ = _shape(info, "wq.weight", "MultiHeadAttention")
    dtype = _dtype(info, "wq.weight")
    n_heads = info.n_heads
    if not isinstance(n_heads, int) or n_heads < 1 or dim % n_heads:
        shown = n_heads if isinstance(n_heads, int) else str(n_heads)
        raise AssertionError(f"MultiHeadAttention.n_heads is {shown}, expected the number of heads")
    eye = torch.eye(dim)
    # wo adds each feature to its neighbour in the same head, so that dropping before wo (a part of a sum)
    # differs from dropping after it (the whole sum).
    head_dim = dim // n_heads
    features = torch.arange(dim)
    neighbour = features - features % head_dim + (features % head_dim + 1) % head_dim
    mixing = eye.clone()
    mixing[features, neighbour] += 1
    weights = {"wq.weight": 0 * eye, "wk.weight": 0 * eye, "wv.weight": eye, "wo.weight": mixing}
    x = torch.ones(BATCH, LENGTH, dim, dtype=dtype)
    keep = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril().view(1, 1, LENGTH, LENGTH)  # row t: t + 1 keys

    def run(call: Calls, training: bool) -> Trace:
        out = _output(call(x, x, x, keep), what="MultiHeadAttention output", shape=x.shape).double()
        return _judge_multi_head(out, n_heads)

    return Setup(_cast(weights, dtype), ("mask",), run)


def _judge_multi_head(out: torch.Tensor, n_heads: int) -> Trace:
    if not bool(out.isfinite().all()):
        return Trace("MultiHeadAttention", (), None, 2, "its output holds NaN or inf where every value is finite: is "
                     "something dropped or masked before the softmax?")
    # Head h of row t is (kept output) * 2 k / (t + 1) * scale, k the number of its t + 1 weights kept.
    out = out.view(BATCH, LENGTH, n_heads, out.shape[-1] // n_heads)
    first = out[:, 0][out[:, 0] != 0]  # row 0 has one key: its kept outputs are the scale itself (times 2, wo's)
    if first.numel() == 0:
        return Trace("MultiHeadAttention", (), None, 2, "every output of position 0 was 0")
    scale = float(first.mean()) / 2
    n = torch.arange(1, LENGTH + 1, dtype=torch.float64).view(1, LENGTH, 1, 1)
    k = out * n / (2 * scale)
    whole = k.round()
    if not torch.allclose(k, whole, atol=1e-3) or bool((whole < 0).any()) or bool((whole > n).any()):
        b, t, h, f = (int(i) for i in torch.nonzero(~torch.isclose(k, whole, atol=1e-3) | (whole < 0) | (whole > n))[0])
        return Trace("MultiHeadAttention", (), scale, 2,
                     f"output {f} of head {h} at position {t} came out {float(out[b, t, h, f]):.4f}, which no "
                     f"dropout of the {t + 1} equal attention weights gives (each output is a whole number of "
                     f"them times {2 * scale / (t + 1):.4f})")
    kept = whole.amax(dim=-1)  # (B, T, heads): weights kept; 0 where the whole head was dropped
    shared = (whole == kept[..., None]) | (whole == 0)
    if not bool(shared.all()):
        b, t, h, _ = (int(i) for i in torch.nonzero(~shared)[0])
        return Trace("MultiHeadAttention", (), scale, 2,
                     f"the features of head {h} at position {t} were built from different numbers of attention "
                     "weights: dropout on the weights acts on the whole head at once")
    seen = kept > 0
    outputs = Dropping("outputs", int((whole[seen] == 0).sum()), int(seen.sum()) * out.shape[-1])
    # A head whose every output is 0 had all its weights dropped, or all its outputs: which, it cannot say, so its
    # weights are not counted (the count then leans a little low: by about 5% of p at p = 0.5).
    rows = n[..., 0].expand_as(kept)
    weights = Dropping("attention weights", int((rows - kept)[seen].sum()), int(rows[seen].sum()))
    return Trace("MultiHeadAttention", (weights, outputs), scale, 2)


SETUPS: dict[str, Callable[[Part], Setup]] = {
    "FeedForward": _feed_forward, "ResidualConnection": _residual, "PositionalEncoding": _positional,
    "HeadAttention": _head, "MultiHeadAttention": _multi_head,
}


@dataclass(frozen=True)
class Part:
    """What `describe` says a part is made of (a claim: a lie only makes the weights fail to load)."""

    parameters: dict[str, dict[str, Any]]
    buffers: dict[str, dict[str, Any]]
    n_heads: object


def _output(value: object, *, what: str, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    out = expect_tensor(value, name=what).detach()
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(f"{what} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    return out


def _cast(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {name: w.to(dtype) for name, w in weights.items()}


def _shape(info: Part, name: str, kind: str) -> list[int]:
    if name not in info.parameters:
        raise AssertionError(f"{kind} has no parameter {name} (parameters: {sorted(info.parameters)[:4]}). "
                             "Hint: use the attribute names of the docstring.")
    return list(info.parameters[name]["shape"])


def _dtype(info: Part, name: str) -> torch.dtype:
    dtype = getattr(torch, str(info.parameters[name]["dtype"]), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32

