"""`head_traces` reads multi-head attention's dropouts back from its output (see `tracers` for the others).

Each output of a position is wo of the heads' values weighted by their attention weights: with random weights
and inputs, the weights are solved for, by least squares, from the outputs the output dropout kept, and a
twin call in eval mode gives each weight's value without dropout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grader.judge.tracers import (
    BATCH,
    LENGTH,
    READ_RTOL,
    UNREAD,
    Calls,
    Dropping,
    Part,
    Setup,
    Trace,
    cast_weights,
    checked_output,
    parameter_dtype,
    parameter_shape,
    uneven,
)
from grader.lang import N_, tr


def multi_head(info: Part) -> Setup:
    dim, _ = parameter_shape(info, "wq.weight", "MultiHeadAttention")
    dtype = parameter_dtype(info, "wq.weight")
    n_heads = info.n_heads
    if not isinstance(n_heads, int) or n_heads < 1 or dim % n_heads:
        shown = n_heads if isinstance(n_heads, int) else str(n_heads)
        raise AssertionError(tr("MultiHeadAttention.n_heads is {n_heads}, expected the number of heads", n_heads=shown))
    head_dim = dim // n_heads
    # Two positions (1 and 2 keys). Each output of position t is wo of the heads' weighted values: the weights
    # are solved for from the outputs the output dropout kept, where those outnumber them (`_read_heads`).
    T = min(2, head_dim)
    rows = max(32, min(4 * BATCH * LENGTH // T, 4096 // dim))  # fewer for wide models: each row reads more
    small = 0.2 / math.sqrt(dim)  # small scores: every weight near 1 / (t + 1), none too small to read
    spread = 1 / math.sqrt(dim)
    weights = cast_weights({"wq.weight": torch.randn(dim, dim) * small, "wk.weight": torch.randn(dim, dim) * small,
                     "wv.weight": torch.randn(dim, dim) * spread, "wo.weight": torch.randn(dim, dim) * spread}, dtype)
    x = torch.randn(rows, T, dim).to(dtype)
    keep = torch.ones(T, T, dtype=torch.bool).tril().view(1, 1, T, T)  # row t: t + 1 keys
    values = (x.double() @ weights["wv.weight"].double().T).view(rows, T, n_heads, head_dim)
    heads = _Heads(values, weights["wo.weight"].double())

    def run(call: Calls, training: bool) -> Trace:
        nominal = None
        if training:
            call.mode(False)
            nominal = heads.read(call(x, x, x, keep))
            call.mode(True)
        read = heads.read(call(x, x, x, keep))
        return heads.judge(read, nominal)

    return Setup(weights, ("mask",), run)


@dataclass(frozen=True)
class _Read:
    """One output of attention read back: which outputs were 0, which positions were 0 throughout ("silent": all
    their weights dropped), which could be solved for their weights, the weights (rows, T, heads, T), and why
    no dropout gives it (or None)."""

    dropped: torch.Tensor
    silent: torch.Tensor
    solved: torch.Tensor
    weights: torch.Tensor
    odd: str | None = None


class _Heads:
    """Reads attention's weights back from its output, for random values and a random wo."""

    def __init__(self, values: torch.Tensor, mixing: torch.Tensor) -> None:
        self.rows, self.T, self.n_heads, self.head_dim = values.shape  # values: (rows, T, heads, head_dim)
        # What a weight of 1 on key s of head h adds to the output: wo's block h applied to that value.
        by_head = mixing.view(mixing.shape[0], self.n_heads, self.head_dim)
        self.adds = torch.einsum("rshd,ohd->rsho", values, by_head)  # (rows, T, heads, dim)

    def read(self, out: object) -> _Read:
        rows, T, n_heads, head_dim = self.rows, self.T, self.n_heads, self.head_dim
        out = checked_output(out, what="MultiHeadAttention output", shape=(rows, T, n_heads * head_dim)).double()
        weights = torch.full((rows, T, n_heads, T), math.nan, dtype=torch.float64)
        solved = torch.zeros(rows, T, dtype=torch.bool)
        if not bool(out.isfinite().all()):
            return _Read(out == 0, solved, solved, weights, tr("its output holds NaN or inf where every value is "
                                                                "finite: is something dropped or masked before the "
                                                                "softmax?"))
        dropped = out == 0
        silent = dropped.all(dim=-1)  # every weight dropped (all its outputs dropped instead: p ** dim)
        for t in range(T):
            unknowns = n_heads * (t + 1)
            kept = ~dropped[:, t]
            # Solved where the kept outputs outnumber the weights by 2: which rows those are is the output
            # dropout's doing alone, so the rows solved are a fair sample of those not silent.
            use = ~silent[:, t] & (kept.sum(dim=-1) >= unknowns + 2)
            if not bool(use.any()):
                continue
            system = self.adds[use, : t + 1].permute(0, 3, 2, 1).reshape(-1, n_heads * head_dim, unknowns)
            a = system * kept[use, :, None]  # outputs dropped weigh nothing
            b = (out[use, t] * kept[use])[..., None]
            c = torch.linalg.lstsq(a, b).solution
            off = (a @ c - b).norm(dim=(1, 2)) > 1e-4 * b.norm(dim=(1, 2)) + 1e-9
            if bool(off.any()):
                return _Read(dropped, silent, solved, weights, tr(
                    "its outputs at position {t} are not wo of its values weighted by each head's attention weights "
                    "(all its features alike), some of those weights and outputs dropped, {unread}", t=t,
                    unread=tr(UNREAD)))
            weights[use, t, :, : t + 1] = c[..., 0].view(-1, n_heads, t + 1)
            solved[:, t] = use
        return _Read(dropped, silent, solved, weights)

    def judge(self, read: _Read, nominal: _Read | None) -> Trace:
        odd = read.odd or (nominal.odd if nominal is not None else None)
        if odd is not None:
            return Trace("MultiHeadAttention", (), None, 2, odd)
        heard = ~read.silent
        outputs = Dropping(N_("outputs"), int(read.dropped[heard].sum()), int(heard.sum()) * read.dropped.shape[-1])
        dropped = seen = 0
        ratios = []
        for t in range(self.T):
            solved = read.solved[:, t] & (nominal.solved[:, t] if nominal is not None else True)
            got = read.weights[solved, t, :, : t + 1]
            ratio = got / nominal.weights[solved, t, :, : t + 1] if nominal is not None else got
            zero = ratio.abs() <= READ_RTOL
            unknowns = self.n_heads * (t + 1)
            # A silent position had all its weights dropped; it counts at the rate the others were solved.
            share = int(solved.sum()) / max(1, int((~read.silent[:, t]).sum()))
            added = round(share * int(read.silent[:, t].sum())) * unknowns
            dropped += int(zero.sum()) + added
            seen += ratio.numel() + added
            if nominal is not None:
                ratios.append(ratio[~zero])
            else:  # no twin: a head with none dropped sums to the scale (its weights to 1 without dropout)
                ratios.append(ratio.sum(dim=-1)[~zero.any(dim=-1)])
        kept = torch.cat(ratios) if ratios else torch.zeros(0, dtype=torch.float64)
        scale = float(kept.median()) if kept.numel() else None
        if nominal is not None and scale is not None and (odd := uneven(kept, scale, N_("attention weights"))):
            return Trace("MultiHeadAttention", (), scale, 2, odd)
        return Trace("MultiHeadAttention", (Dropping(N_("attention weights"), dropped, seen), outputs), scale, 2)
