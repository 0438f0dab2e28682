"""`head_traces` reads back, by least squares, the dropouts a linear map mixes into the output: attention's weights
through their values (and wo), a feed-forward's hidden activations through w2 (see `tracers` for the rest).

A head's output is its values weighted by its attention weights: with random weights and inputs the weights are
solved for from the output (a multi-head module's from the outputs its output dropout kept, through wo), and the
same call in eval mode gives each weight's value without dropout. Sequences are as short as that solve needs: each
row's weights fewer than the equations. A feed-forward's output is w2 of its hidden activations: at the positions
where fewer are active than w2 has rows, each active one is solved for, and compared with relu(w1(x)) computed here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from grader.judge.tracers import (
    ELEMENTS,
    LENGTH,
    READ_RTOL,
    TARGET,
    UNREAD,
    Draw,
    Part,
    Reading,
    Setup,
    Tally,
    cast_weights,
    checked_output,
    linear,
    parameter_dtype,
    parameter_shape,
)
from grader.lang import N_, tr

ROWS = 256  # the most batch elements a call sends: a narrow model reads few weights from each


def head(info: Part) -> Setup:
    head_size, n_embd = parameter_shape(info, "key.weight", "HeadAttention")
    block = info.buffers.get("tril", info.parameters.get("tril", {"shape": [LENGTH]}))["shape"][0]
    dtype = parameter_dtype(info, "key.weight")
    # Each row of weights is read back through the values, which needs T independent values and one to spare.
    T = max(1, min(LENGTH, head_size - 1, n_embd - 1, block))
    site = N_("attention weights")
    unread = tr("its output is not value(x) weighted by attention weights, {unread}", unread=tr(UNREAD))

    def draw() -> Draw:
        weights = cast_weights({f"{name}.weight": linear(n_embd, head_size, bias=False)["weight"]
                                for name in ("query", "key", "value")}, dtype)
        x = torch.randn(min(ROWS, math.ceil(TARGET / (T * (T + 1) / 2))), T, n_embd).to(dtype)
        values = x.double() @ weights["value.weight"].double().T  # (B, T, head_size)
        below = torch.ones(T, T, dtype=torch.bool).tril()

        def solve(out: object) -> torch.Tensor | None:  # (B, T, T): out = weights @ values, solved for the weights
            out = checked_output(out, what="HeadAttention output", shape=(len(x), T, head_size)).double()
            weight = torch.linalg.lstsq(values.transpose(1, 2), out.transpose(1, 2)).solution.transpose(1, 2)
            if not bool((weight @ values - out).norm() <= 1e-4 * out.norm() + 1e-9):
                return None  # not a weighting of value(x): nothing to read
            return weight

        def read(evaluated: object, trained: object | None, tally: Tally) -> None:
            nominal = solve(evaluated)
            if nominal is None:
                tally.evaluated.fail(unread)
                tally.trained.fail(unread)
                return
            # In eval mode every weight of a causal row is there (a softmax is never 0), and each row sums to 1.
            dropped = (nominal.abs() <= READ_RTOL * float(nominal.abs().max().clamp_min(1e-12))) & below
            tally.evaluated.count(site, int(dropped.sum()), int(below.sum()) * len(x))
            tally.evaluated.keep(nominal.sum(dim=-1)[~dropped.any(dim=-1)])
            if trained is not None:
                weight = solve(trained)
                if weight is None:
                    tally.trained.fail(unread)
                    return
                use = below & ~dropped
                tally.trained.ratios(site, weight[use] / nominal[use])

        return Draw(weights, lambda call: call(x), read)

    return Setup("HeadAttention", 1, ("tril",), draw)


def feed_forward(info: Part) -> Setup:
    d_ff, d_model = parameter_shape(info, "w1.weight", "FeedForward")
    dtype = parameter_dtype(info, "w1.weight")
    count = _elements(d_model, d_ff)

    def draw() -> Draw:
        w1, w2 = linear(d_model, d_ff), linear(d_ff, d_model)
        weights = cast_weights({"w1.weight": w1["weight"], "w1.bias": w1["bias"], "w2.weight": w2["weight"],
                                "w2.bias": w2["bias"]}, dtype)
        w = {name: weight.double() for name, weight in weights.items()}
        x = torch.randn(count, LENGTH, d_model).to(dtype)
        reader = _Hidden(w, torch.relu(x.double() @ w["w1.weight"].T + w["w1.bias"]), dtype)

        def read(evaluated: object | None, trained: object | None, tally: Tally) -> None:
            for out, reading in ((evaluated, tally.evaluated), (trained, tally.trained)):
                if out is not None:
                    out = checked_output(out, what="FeedForward output", shape=x.shape)
                    reading.ratios(N_("hidden activations"), reader.ratios(out))

        return Draw(weights, lambda part: part(x), read)

    return Setup("FeedForward", 1, (), draw, twin=False)


@functools.cache
def _elements(d_model: int, d_ff: int) -> int:
    """How many batch elements a feed-forward's call sends: enough for the reading to reach TARGET under a fixed draw
    of weights and inputs of these sizes (so a function of the sizes alone); two where nothing can be read back."""
    generator = torch.Generator().manual_seed(0)

    def drawn(*shape: int, fan_in: int) -> torch.Tensor:  # as nn.Linear draws them
        return (2 * torch.rand(*shape, generator=generator, dtype=torch.float64) - 1) / math.sqrt(fan_in)

    w = {"w1.weight": drawn(d_ff, d_model, fan_in=d_model), "w1.bias": drawn(d_ff, fan_in=d_model),
         "w2.weight": drawn(d_model, d_ff, fan_in=d_ff), "w2.bias": drawn(d_model, fan_in=d_ff)}
    x = torch.randn(ELEMENTS, LENGTH, d_model, generator=generator, dtype=torch.float64)
    read = int(_Hidden(w, torch.relu(x @ w["w1.weight"].T + w["w1.bias"]), torch.float32).counts.sum())
    return min(ELEMENTS, math.ceil(1.25 * TARGET * ELEMENTS / read)) if read else 2


class _Hidden:
    """A feed-forward's hidden activations (B, T, d_ff), read back through w2 where fewer of them are active than w2
    has rows (its active columns are then independent: least squares gives each), and where that is precise."""

    def __init__(self, w: dict[str, torch.Tensor], hidden: torch.Tensor, dtype: torch.dtype) -> None:
        w2, self.b2 = w["w2.weight"], w["w2.bias"]
        d_model, d_ff = w2.shape
        self.length, width = hidden.shape[1], max(1, min(d_ff, d_model - 1))
        flat = hidden.reshape(-1, d_ff)
        self.at = torch.nonzero((flat > 0).sum(dim=-1) < d_model).flatten()  # positions with an equation to spare
        units = (flat[self.at] > 0).double().argsort(dim=-1, descending=True, stable=True)[:, :width]  # active first
        self.hidden = torch.gather(flat[self.at], 1, units)  # (n, width), 0 past the active ones
        active = self.hidden > 0
        columns = w2[:, units].permute(1, 0, 2) * active[:, None, :]  # (n, d_model, width)
        normal = columns.transpose(1, 2) @ columns + torch.diag_embed((~active).double())  # the rest solve to 0
        self.solve = torch.linalg.solve(normal, columns.transpose(1, 2))  # (n, width, d_model)
        # Each unit's error through the solve, from the output's float rounding, kept well under READ_RTOL.
        rounding = 8 * torch.finfo(dtype).eps * (columns.abs() @ (2 * self.hidden)[..., None] + self.b2.abs()[:, None])
        error = self.solve.norm(dim=-1) * math.sqrt(d_model) * rounding.amax(dim=(1, 2))[:, None]
        self.read = active & (error <= 0.1 * READ_RTOL * self.hidden)
        self.counts = torch.zeros(len(hidden), dtype=torch.long).index_add_(0, self.at // self.length,
                                                                          self.read.sum(dim=-1))

    def ratios(self, out: torch.Tensor) -> torch.Tensor:
        """Each readable hidden activation over its value without dropout, from the output (B, T, d_model)."""
        y = out.double().reshape(-1, out.shape[-1])[self.at] - self.b2
        seen = (self.solve @ y[..., None])[..., 0]  # (n, width): each active unit's contribution, kept or not, scaled
        return seen[self.read] / self.hidden[self.read]


def multi_head(info: Part) -> Setup:
    dim, _ = parameter_shape(info, "wq.weight", "MultiHeadAttention")
    dtype = parameter_dtype(info, "wq.weight")
    n_heads = info.n_heads
    if not isinstance(n_heads, int) or n_heads < 1 or dim % n_heads:
        shown = n_heads if isinstance(n_heads, int) else str(n_heads)
        raise AssertionError(tr("MultiHeadAttention.n_heads is {n_heads}, expected the number of heads", n_heads=shown))
    head_dim = dim // n_heads
    longest = (info.buffers.get("mask", {}).get("shape") or [LENGTH])[-1]  # a causal mask's max_seq_len
    T, per_element = _length(dim, n_heads, longest)

    def draw() -> Draw:
        weights = cast_weights({f"{name}.weight": linear(dim, dim, bias=False)["weight"]
                                for name in ("wq", "wk", "wv", "wo")}, dtype)
        x = torch.randn(min(ROWS, math.ceil(1.25 * TARGET / per_element)), T, dim).to(dtype)  # a round more if short
        values = (x.double() @ weights["wv.weight"].double().T).view(len(x), T, n_heads, head_dim)
        heads = _Heads(values, weights["wo.weight"].double())

        def read(evaluated: object, trained: object | None, tally: Tally) -> None:
            nominal = heads.read(evaluated, (T,) * T)
            attended = heads.attended(nominal)
            heads.judge(nominal, None, attended, tally.evaluated)
            if trained is not None:
                heads.judge(heads.read(trained, tuple(attended.sum(dim=-1).tolist())), nominal, attended, tally.trained)

        return Draw(weights, lambda call: call(x, x, x), read)

    return Setup("MultiHeadAttention", 2, ("mask",), draw)


def _length(dim: int, n_heads: int, longest: int) -> tuple[int, float]:
    """The sequence length whose weights read best, and how many a batch element reads then: row by row, the outputs
    the output dropout keeps (p = 0.3, say) must outnumber the weights, a head's T per head, by two."""

    def kept_at_least(k: int) -> float:
        return sum(math.comb(dim, i) * 0.7 ** i * 0.3 ** (dim - i) for i in range(max(k, 0), dim + 1))

    lengths = range(1, max(1, min(LENGTH, longest, (dim - 2) // n_heads)) + 1)
    reads = {T: T * n_heads * T * kept_at_least(n_heads * T + 2) for T in lengths}
    T = max(reads, key=reads.__getitem__)
    return T, max(reads[T], 1.0)


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

    def read(self, out: object, keys: tuple[int, ...]) -> _Read:
        """The weights of each position t on its first keys[t] keys, solved for from the outputs kept."""
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
        for k in sorted(set(keys)):  # the positions that attend k keys, solved together
            at = torch.tensor([t for t, attends in enumerate(keys) if attends == k])
            unknowns = n_heads * k
            kept = ~dropped[:, at]  # (rows, positions, dim)
            # Solved where the kept outputs outnumber the weights by 2: which rows those are is the output
            # dropout's doing alone, so the rows solved are a fair sample of those not silent.
            row, j = torch.nonzero(~silent[:, at] & (kept.sum(dim=-1) >= unknowns + 2), as_tuple=True)
            if not len(row):
                continue
            a = self.adds[row, :k].permute(0, 3, 2, 1).reshape(-1, n_heads * head_dim, unknowns) * kept[row, j, :, None]
            b = (out[row, at[j]] * kept[row, j])[..., None]  # outputs dropped weigh nothing
            c = torch.linalg.lstsq(a, b).solution
            off = (a @ c - b).norm(dim=(1, 2)) > 1e-4 * b.norm(dim=(1, 2)) + 1e-9
            if bool(off.any()):
                return _Read(dropped, silent, solved, weights, tr(
                    "its outputs at position {t} are not wo of its values weighted by each head's attention weights "
                    "(all its features alike), some of those weights and outputs dropped, {unread}",
                    t=int(at[j[off][0]]), unread=tr(UNREAD)))
            weights[row, at[j], :, :k] = c[..., 0].view(-1, n_heads, k)
            solved[row, at[j]] = True
        return _Read(dropped, silent, solved, weights)

    def attended(self, nominal: _Read) -> torch.Tensor:
        """(T, T): the keys each position attends, read from the call in eval mode: under a causal mask of the
        module's own, every later key's weight is 0 throughout; without one, every key is attended."""
        later = torch.ones(self.T, self.T, dtype=torch.bool).triu(1)
        blocked = (nominal.weights.abs() <= READ_RTOL) | ~nominal.solved[:, :, None, None] | ~later[None, :, None, :]
        causal = nominal.odd is None and bool(nominal.solved.any()) and bool(blocked.all())
        return ~later if causal else torch.ones(self.T, self.T, dtype=torch.bool)

    def judge(self, read: _Read, nominal: _Read | None, attended: torch.Tensor, into: Reading) -> None:
        """Count, into `into`, the weights and outputs dropped; keep the weights' ratios to their value in eval mode
        (or, read in eval mode, each head's sum over its keys where none was dropped: 1 without dropout)."""
        odd = read.odd or (nominal.odd if nominal is not None else None)
        if odd is not None:
            into.fail(odd)
            return
        heard = ~read.silent
        into.count(N_("attention weights"), 0, 0)  # the weights first, as every trace lists them
        into.count(N_("outputs"), int(read.dropped[heard].sum()), int(heard.sum()) * read.dropped.shape[-1])
        solved = read.solved & nominal.solved if nominal is not None else read.solved  # (rows, T)
        ratio = read.weights / nominal.weights if nominal is not None else read.weights  # (rows, T, heads, T)
        counted = (solved[:, :, None, None] & attended[None, :, None, :]).expand_as(ratio)
        zero = (ratio.abs() <= READ_RTOL) & counted
        # A silent position had all its weights dropped; it counts at the rate the others were solved.
        share = solved.sum(dim=0) / (~read.silent).sum(dim=0).clamp_min(1)  # (T,)
        added = int(((share * read.silent.sum(dim=0)).round() * self.n_heads * attended.sum(dim=-1)).sum())
        into.count(N_("attention weights"), int(zero.sum()) + added, int(counted.sum()) + added)
        if nominal is not None:
            into.keep(ratio[counted & ~zero], N_("attention weights"))
        else:  # no twin: a head with none dropped sums to the scale (its weights to 1 without dropout)
            whole = solved[:, :, None] & ~zero.any(dim=-1)  # (rows, T, heads)
            into.keep(torch.where(counted, ratio, 0).sum(dim=-1)[whole])
