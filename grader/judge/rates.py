"""`rates` measures a module's dropouts by what it computes: how often each drops, and how it scales what it keeps.

Each contract module gets weights that turn its output into a trace of its dropouts: a feed-forward whose
hidden units are all 1 and whose w2 copies them out, attention whose scores are all equal and whose
values are ones. Every output is then 0 (dropped) or a known value times the scale of whatever dropout
kept it, so the trace shows how many were dropped at each place and by what the rest were scaled,
however the dropout is spelled: `nn.Dropout`, `F.dropout(x, p, self.training)`, the fused kernel's
`dropout_p`, an inner module. Composite modules are measured part by part (`parts`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from grader.host.failures import SubmissionFailure
from grader.host.remote import Remote
from grader.judge.expect import expect_tensor
from grader.judge.structure import ModuleInfo, describe, load_parameters

Module = torch.nn.Module | Remote
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
            return "as p" if _within(site, p) else f"{site.rate:.1f}"

        want = (1 - p) ** -self.chained
        scale = ("none kept" if self.scale is None else "as p" if abs(self.scale - want) <= 1e-3 * want
                 else f"{self.scale:.2f}")
        return (*(rate(site) for site in self.sites), scale)


def measure(kind: str, module: Module, *, training: bool = True,
            ones_like: Callable[[torch.Tensor], object] = torch.ones_like) -> Trace:
    """Trace `module`, a contract module of class `kind`, in training (or eval) mode; its weights are overwritten.

    `ones_like`: ResidualConnection's sublayer, a function that returns ones of its argument's shape,
    living where the module does (the worker's `torch.ones_like` for a Remote).
    """
    module.train(training)
    if kind == "FeedForward":
        return _feed_forward(module)
    if kind == "ResidualConnection":
        return _residual(module, ones_like)
    if kind == "PositionalEncoding":
        return _positional(module, training)
    if kind == "HeadAttention":
        return _head(module)
    if kind == "MultiHeadAttention":
        return _multi_head(module)
    raise ValueError(f"no dropout trace for {kind}")


def expect_dropout(kind: str, module: Module, p: float, *, what: str, hint: str = "", training: bool = True,
                   n_layers: int = 2,
                   ones_like: Callable[[torch.Tensor], object] = torch.ones_like) -> None:
    """Fail as feedback unless every dropout of `module` (a contract module of class `kind`, or each contract
    part of a composite one) acts with probability p in training mode, and none acts in eval mode."""
    mode = "in training mode" if training else "in eval mode"
    for path, part_kind in parts(kind, n_layers):
        where = f"{what}.{path}" if path else what
        trace = measure(part_kind, part_of(module, path, what=what), training=training, ones_like=ones_like)
        expect_rate(trace, p if training else 0.0, what=f"{where} {mode}", hint=hint)


def part_of(module: Module, path: str, *, what: str) -> Module:
    """`module.get_submodule(path)` ('' is the module itself), failing as feedback when there is none."""
    try:
        return module.get_submodule(path) if path else module
    except (AttributeError, SubmissionFailure):
        raise AssertionError(f"{what} has no submodule {path}. Hint: use the attribute names of the "
                             "docstring.") from None


def expect_rate(trace: Trace, p: float, *, what: str, hint: str) -> None:
    """Fail as feedback unless every dropout of the trace dropped with probability p and scaled by 1 / (1 - p)."""
    suffix = f" Hint: {hint}" if hint else ""
    if trace.odd is not None:
        raise AssertionError(f"{what}: {trace.odd}.{suffix}")
    for site in trace.sites:
        if not _within(site, p):
            expected = site.seen * p
            about = "none" if p == 0 else f"about {expected:.0f} ({p:.0%})"
            raise AssertionError(f"{what} dropped {site.dropped} of {site.seen} {site.site} ({site.rate:.0%}), "
                                 f"where dropout with p = {p} drops {about}.{suffix}")
    want = (1 - p) ** -trace.chained
    if trace.scale is not None and abs(trace.scale - want) > 1e-3 * want:
        what_scales = ("1 / (1 - p)" if trace.chained == 1
                       else f"(1 / (1 - p))^{trace.chained}, one 1 / (1 - p) per dropout")
        raise AssertionError(f"{what} scaled the values it kept by {trace.scale:.4f}, where dropout with p = {p} "
                             f"scales them by {what_scales} = {want:.4f}.{suffix}")


def parts(kind: str, n_layers: int = 2) -> tuple[tuple[str, str], ...]:
    """The contract's parts of a module that hold dropout: (path for get_submodule, class), ('', kind) for a
    module that holds its own."""
    attention = "MultiHeadAttention"
    encoder_layer = (("self_attn", attention), ("feed_forward", "FeedForward"),
                     *((f"residual{i}", "ResidualConnection") for i in (1, 2)))
    decoder_layer = (("self_attn", attention), ("cross_attn", attention), ("feed_forward", "FeedForward"),
                     *((f"residual{i}", "ResidualConnection") for i in (1, 2, 3)))

    def stacked(prefix: str, layer: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((f"{prefix}layers.{i}.{path}", part) for i in range(n_layers) for path, part in layer)

    contracted = {
        "EncoderLayer": encoder_layer,
        "DecoderLayer": decoder_layer,
        "Encoder": stacked("", encoder_layer),
        "Decoder": stacked("", decoder_layer),
        "Transformer": (("pos", "PositionalEncoding"), *stacked("encoder.", encoder_layer),
                        *stacked("decoder.", decoder_layer)),
    }
    return contracted.get(kind, (("", kind),))


# --- one tracing setup per contract module ------------------------------------------------------


def _feed_forward(module: Module) -> Trace:
    info = describe(module)
    d_ff, d_model = _shape(info, "w1.weight", "FeedForward")
    dtype = _dtype(info, "w1.weight")
    width = min(d_model, d_ff)
    _load(module, "FeedForward", {  # every hidden unit relu(0 x + 1) = 1, and w2 copies the first ones out
        "w1.weight": torch.zeros(d_ff, d_model), "w1.bias": torch.ones(d_ff),
        "w2.weight": torch.eye(d_model, d_ff), "w2.bias": torch.zeros(d_model),
    }, dtype)
    out = _call(module, torch.zeros(BATCH, LENGTH, d_model, dtype=dtype), what="FeedForward output",
                shape=(BATCH, LENGTH, d_model))
    return _bernoulli("FeedForward", out[..., :width], "hidden activations")


def _residual(module: Module, ones_like: Callable[[torch.Tensor], object]) -> Trace:
    info = describe(module)
    (d_model,) = _shape(info, "norm.weight", "ResidualConnection")
    x = torch.zeros(BATCH, LENGTH, d_model, dtype=_dtype(info, "norm.weight"))
    out = _call(module, x, ones_like, what="ResidualConnection output", shape=x.shape)  # 0 + dropout(ones)
    return _bernoulli("ResidualConnection", out, "outputs of the sublayer")


def _positional(module: Module, training: bool) -> Trace:
    info = describe(module)
    if "pe" not in info.buffers:
        raise AssertionError(f"PositionalEncoding has no buffer pe (buffers: {sorted(info.buffers)[:4]})")
    if len(info.buffers["pe"]["shape"]) != 3:
        raise AssertionError(f"PositionalEncoding.pe has shape {info.buffers['pe']['shape']}, expected (1, max_len, "
                             "d_model). Hint: register pe.unsqueeze(0) as the buffer.")
    _, max_len, d_model = info.buffers["pe"]["shape"]
    dtype = getattr(torch, str(info.buffers["pe"]["dtype"]), torch.float32)
    zeros = torch.zeros(BATCH, min(LENGTH, max_len), d_model, dtype=dtype)
    pe = _call(module.eval(), zeros, what="PositionalEncoding output in eval mode", shape=zeros.shape)  # its pe
    module.train(training)
    out = _call(module, 1 - pe, what="PositionalEncoding output", shape=zeros.shape)  # dropout(1 - pe + pe)
    return _bernoulli("PositionalEncoding", out, "values of x + pe")


def _head(module: Module) -> Trace:
    info = describe(module)
    head_size, n_embd = _shape(info, "key.weight", "HeadAttention")
    block = info.buffers.get("tril", info.parameters.get("tril", {"shape": [LENGTH]}))["shape"][0]
    dtype = _dtype(info, "key.weight")
    T = min(LENGTH, head_size, n_embd, block)
    _load(module, "HeadAttention", {  # equal scores; the value of position s is e_s
        "query.weight": torch.zeros(head_size, n_embd), "key.weight": torch.zeros(head_size, n_embd),
        "value.weight": torch.eye(head_size, n_embd),
    }, dtype, allow=("tril",))
    x = torch.eye(T, n_embd, dtype=dtype).expand(4 * BATCH, T, n_embd).contiguous()
    out = _call(module, x, what="HeadAttention output", shape=(4 * BATCH, T, head_size))
    out = out[..., :T]  # out[b, t, s]: the weight of s in row t
    nominal = torch.ones(T, T).tril()
    nominal = nominal / nominal.sum(dim=-1, keepdim=True)
    below = nominal > 0
    return _bernoulli("HeadAttention", out[:, below] / nominal[below].to(out.dtype), "attention weights")


def _multi_head(module: Module) -> Trace:
    info = describe(module)
    dim, _ = _shape(info, "wq.weight", "MultiHeadAttention")
    dtype = _dtype(info, "wq.weight")
    n_heads = module.n_heads
    if not isinstance(n_heads, int) or n_heads < 1 or dim % n_heads:
        raise AssertionError(f"MultiHeadAttention.n_heads is {n_heads!r}, expected the number of heads")
    eye = torch.eye(dim)
    # wo adds each feature to its neighbour in the same head, so that dropping before wo (a part of a sum)
    # differs from dropping after it (the whole sum).
    head_dim = dim // n_heads
    features = torch.arange(dim)
    neighbour = features - features % head_dim + (features % head_dim + 1) % head_dim
    mixing = eye.clone()
    mixing[features, neighbour] += 1
    _load(module, "MultiHeadAttention", {"wq.weight": 0 * eye, "wk.weight": 0 * eye, "wv.weight": eye,
                                         "wo.weight": mixing}, dtype, allow=("mask",))
    x = torch.ones(BATCH, LENGTH, dim, dtype=dtype)
    keep = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril().view(1, 1, LENGTH, LENGTH)  # row t: t + 1 keys
    out = _call(module, x, x, x, keep, what="MultiHeadAttention output", shape=x.shape).double()
    if not bool(out.isfinite().all()):
        return Trace("MultiHeadAttention", (), None, 2, "its output holds NaN or inf where every value is finite: is "
                     "something dropped or masked before the softmax?")
    # Head h of row t is (kept output) * 2 k / (t + 1) * scale, k the number of its t + 1 weights kept.
    out = out.view(BATCH, LENGTH, n_heads, dim // n_heads)
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


# --- helpers -------------------------------------------------------------------------------------


def _within(site: Dropping, p: float) -> bool:
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


def _call(module: Module, *args: object, what: str, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    out = expect_tensor(module(*args), name=what).detach()
    if tuple(out.shape) != tuple(shape):
        raise AssertionError(f"{what} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    return out


def _load(module: Module, kind: str, weights: dict[str, torch.Tensor], dtype: torch.dtype, *,
          allow: tuple[str, ...] = ()) -> None:
    load_parameters(module, {name: w.to(dtype) for name, w in weights.items()}, name=kind, allow=allow,
                    names_hint="use the attribute names of the docstring")


def _shape(info: ModuleInfo, name: str, kind: str) -> list[int]:
    if name not in info.parameters:
        raise AssertionError(f"{kind} has no parameter {name} (parameters: {sorted(info.parameters)[:4]}). "
                             "Hint: use the attribute names of the docstring.")
    return list(info.parameters[name]["shape"])


def _dtype(info: ModuleInfo, name: str) -> torch.dtype:
    dtype = getattr(torch, str(info.parameters[name]["dtype"]), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32
