"""`tracers` holds, for each contract module that drops, the weights and inputs that turn its output into a
trace of its dropouts, and the judge that reads the trace (see `rates`, which runs them).

Every traced output is 0 (dropped) or a known value times the scale of whatever dropout kept it, so the
trace shows how many were dropped at each place and by what the rest were scaled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from grader.judge.expect import expect_tensor

BATCH, LENGTH = 16, 8
VALUE_RTOL = 1e-4  # kept values are one float32 product away from their nominal value
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


def _bernoulli(kind: str, values: torch.Tensor, site: str) -> Trace:
    """Values whose no-dropout value is 1: each must be 0 or one common scale."""
    values = values.detach().double().flatten()
    if not bool(values.isfinite().all()):
        return Trace(kind, (), None, 1, f"its {site} hold NaN or inf where every value is finite")
    dropped = values == 0
    kept = values[~dropped]
    if kept.numel() == 0:
        return Trace(kind, (Dropping(site, int(dropped.sum()), values.numel()),), None, 1)
    scale = float(kept.median())
    off = (kept - scale).abs() > VALUE_RTOL * abs(scale)
    if bool(off.any()):
        return Trace(kind, (), scale, 1, f"of its {site}, those it kept came out {scale:.4f} and "
                                         f"{float(kept[off][0]):.4f}: dropout scales every value it keeps alike")
    return Trace(kind, (Dropping(site, int(dropped.sum()), values.numel()),), scale, 1)


# --- one tracing setup per contract module ------------------------------------------------------
# Each takes what the worker says the part is made of and returns the job for `probes.run_traced` (weights,
# arguments) and the judge of its outputs.

Judge = Callable[[list[object]], Trace]


def _feed_forward(info: Part) -> tuple[dict[str, object], Judge]:
    d_ff, d_model = _shape(info, "w1.weight", "FeedForward")
    dtype = _dtype(info, "w1.weight")
    width = min(d_model, d_ff)
    weights = {  # every hidden unit relu(0 x + 1) = 1, and w2 copies the first ones out
        "w1.weight": torch.zeros(d_ff, d_model), "w1.bias": torch.ones(d_ff),
        "w2.weight": torch.eye(d_model, d_ff), "w2.bias": torch.zeros(d_model),
    }

    def judge(outputs: list[object]) -> Trace:
        out = _output(outputs[-1], what="FeedForward output", shape=(BATCH, LENGTH, d_model))
        return _bernoulli("FeedForward", out[..., :width], "hidden activations")

    return {"weights": _cast(weights, dtype), "args": [torch.zeros(BATCH, LENGTH, d_model, dtype=dtype)]}, judge


def _residual(info: Part) -> tuple[dict[str, object], Judge]:
    (d_model,) = _shape(info, "norm.weight", "ResidualConnection")
    x = torch.zeros(BATCH, LENGTH, d_model, dtype=_dtype(info, "norm.weight"))

    def judge(outputs: list[object]) -> Trace:  # 0 + dropout(ones)
        out = _output(outputs[-1], what="ResidualConnection output", shape=x.shape)
        return _bernoulli("ResidualConnection", out, "outputs of the sublayer")

    return {"args": [x], "sublayer": True}, judge


def _positional(info: Part) -> tuple[dict[str, object], Judge]:
    if "pe" not in info.buffers:
        raise AssertionError(f"PositionalEncoding has no buffer pe (buffers: {sorted(info.buffers)[:4]})")
    if len(info.buffers["pe"]["shape"]) != 3:
        raise AssertionError(f"PositionalEncoding.pe has shape {info.buffers['pe']['shape']}, expected (1, max_len, "
                             "d_model). Hint: register pe.unsqueeze(0) as the buffer.")
    _, max_len, d_model = info.buffers["pe"]["shape"]
    dtype = getattr(torch, str(info.buffers["pe"]["dtype"]), torch.float32)
    zeros = torch.zeros(BATCH, min(LENGTH, max_len), d_model, dtype=dtype)

    def judge(outputs: list[object]) -> Trace:  # its pe in eval mode, then dropout(1 - pe + pe)
        _output(outputs[0], what="PositionalEncoding output in eval mode", shape=zeros.shape)
        out = _output(outputs[-1], what="PositionalEncoding output", shape=zeros.shape)
        return _bernoulli("PositionalEncoding", out, "values of x + pe")

    return {"args": [zeros], "through_eval": True}, judge


def _head(info: Part) -> tuple[dict[str, object], Judge]:
    head_size, n_embd = _shape(info, "key.weight", "HeadAttention")
    block = info.buffers.get("tril", info.parameters.get("tril", {"shape": [LENGTH]}))["shape"][0]
    dtype = _dtype(info, "key.weight")
    T = min(LENGTH, head_size, n_embd, block)
    weights = {  # equal scores; the value of position s is e_s
        "query.weight": torch.zeros(head_size, n_embd), "key.weight": torch.zeros(head_size, n_embd),
        "value.weight": torch.eye(head_size, n_embd),
    }
    x = torch.eye(T, n_embd, dtype=dtype).expand(4 * BATCH, T, n_embd).contiguous()

    def judge(outputs: list[object]) -> Trace:
        out = _output(outputs[-1], what="HeadAttention output", shape=(4 * BATCH, T, head_size))
        out = out[..., :T]  # out[b, t, s]: the weight of s in row t
        nominal = torch.ones(T, T).tril()
        nominal = nominal / nominal.sum(dim=-1, keepdim=True)
        below = nominal > 0
        return _bernoulli("HeadAttention", out[:, below] / nominal[below].to(out.dtype), "attention weights")

    return {"weights": _cast(weights, dtype), "allow": ["tril"], "args": [x]}, judge


def _multi_head(info: Part) -> tuple[dict[str, object], Judge]:
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

    def judge(outputs: list[object]) -> Trace:
        out = _output(outputs[-1], what="MultiHeadAttention output", shape=x.shape).double()
        return _judge_multi_head(out, n_heads)

    return {"weights": _cast(weights, dtype), "allow": ["mask"], "args": [x, x, x, keep]}, judge


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
    weights = Dropping("attention weights", int((n[..., 0] - kept).sum()), int(n.sum()) * BATCH * n_heads)
    return Trace("MultiHeadAttention", (weights, outputs), scale, 2)


SETUPS: dict[str, Callable[[Part], tuple[dict[str, object], Judge]]] = {
    "FeedForward": _feed_forward, "ResidualConnection": _residual, "PositionalEncoding": _positional,
    "HeadAttention": _head, "MultiHeadAttention": _multi_head,
}


@dataclass(frozen=True)
class Part:
    """What the worker says a part is made of (`probes.parts_of`): a claim, read defensively."""

    parameters: dict[str, dict[str, Any]]
    buffers: dict[str, dict[str, Any]]
    n_heads: object


def part_info(found: dict[str, Any]) -> Part:
    """A `probes.parts_of` entry as a Part, keeping only parameters and buffers whose shape is a list of ints."""
    def tensors(value: object) -> dict[str, dict[str, Any]]:
        if not isinstance(value, dict):
            return {}
        return {str(name): info for name, info in value.items()
                if isinstance(info, dict) and isinstance(info.get("shape"), list)
                and all(isinstance(n, int) for n in info["shape"])}

    return Part(tensors(found.get("parameters")), tensors(found.get("buffers")), found.get("n_heads"))


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

