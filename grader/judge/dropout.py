"""`dropout` judges dropout by what it does: whether dropping attention weights can give a train-mode output."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from grader.judge.checks import tolerance
from grader.judge.expect import hint_suffix
from grader.lang import tr


def uniform_causal(T: int) -> torch.Tensor:
    """(T, T) attention weights of equal scores under a causal mask: 1 / (t + 1) on positions 0..t of row t."""
    weights = torch.ones(T, T).tril()
    return weights / weights.sum(dim=-1, keepdim=True)


def explained_by_weight_dropout(run: Callable[[], Any], values: torch.Tensor, weights: torch.Tensor, *, p: float,
                                groups: int, output_dropout: bool, atol: float = 1e-4) -> bool:
    """Whether `run()` (a train-mode call) gives an output that dropout on `weights` explains (see below)."""
    try:
        out = run()
    except AssertionError:
        return False
    return unexplained_by_weight_dropout(out, values, weights, p=p, groups=groups, output_dropout=output_dropout,
                                         atol=atol) is None


def unexplained_by_weight_dropout(
    out: torch.Tensor,
    values: torch.Tensor,
    weights: torch.Tensor,
    *,
    p: float,
    groups: int,
    output_dropout: bool,
    atol: float = 1e-4,
) -> str | None:
    """Why a train-mode output is not one that dropout on the attention weights can give, or None when it is.

    `weights` (T_q, T_k) are the attention weights without dropout and `values` (B, T_k, F) the values,
    split into `groups` heads of F // groups features (every projection the identity). With inverted
    dropout on the weights, head h at (b, t) is sum_s weights[t, s] * keep[s] * values[b, s, h] / (1 - p)
    for one keep pattern in {0, 1}^T_k; with `output_dropout` each feature is then 0 or that over (1 - p).
    Every pattern is enumerated (T_k is tiny), so any correct way of dropping the weights passes (the
    contract's module, an inner one, the fused kernel's dropout_p, heads folded into the batch), and
    dropout on the values or the output instead, a missing 1 / (1 - p) or no dropout at all do not.
    """
    out = out.detach().to("cpu", torch.float64)
    values = values.detach().to("cpu", torch.float64)
    weights = weights.detach().to("cpu", torch.float64)
    B, T_k, F = values.shape
    T_q = weights.shape[0]
    if tuple(out.shape) != (B, T_q, F):
        return tr("the output has shape {shape}, expected {expected}", shape=tuple(out.shape), expected=(B, T_q, F))
    patterns = torch.cartesian_prod(*[torch.tensor([0.0, 1.0], dtype=torch.float64)] * T_k).reshape(-1, T_k)
    reachable = torch.einsum("ts,ps,bsf->btpf", weights, patterns, values) / (1 - p)  # (B, T_q, P, F)
    kept = reachable / (1 - p) if output_dropout else reachable
    got = out[:, :, None, :]  # (B, T_q, 1, F)
    tol = atol * (1 + kept.abs())
    match = (got - kept).abs() <= tol
    if output_dropout:
        match = match | (got.abs() <= atol)
    size = F // groups
    per_pattern = match.view(B, T_q, -1, groups, size).all(dim=-1)  # (B, T_q, P, groups)
    explained = per_pattern.any(dim=2)
    if not bool(explained.all()):
        b, t, h = (int(i) for i in torch.nonzero(~explained)[0])
        shown = [round(v, 4) for v in out[b, t, h * size:(h + 1) * size].tolist()]
        if output_dropout:
            return tr("at batch element {b}, position {t}, head {h}, no dropout pattern on the attention weights and "
                      "the output gives the output {values}", b=b, t=t, h=h, values=shown)
        return tr("at batch element {b}, position {t}, head {h}, no dropout pattern on the attention weights gives the "
                  "output {values}", b=b, t=t, h=h, values=shown)
    # Dropout twice on the output is explained by keeping every weight: the weights must be seen dropped, about
    # as often as p says (a lower bound 6 standard deviations below the expected count).
    dropped = int((~per_pattern[:, :, -1]).sum())  # the last pattern keeps every key
    n = (weights != 0).sum(dim=-1).double()  # (T_q,)
    q = 1 - (1 - p) ** n - p**n  # some weight of row t dropped, not all (all dropped looks like output dropout)
    expected = float(q.sum()) * B * groups
    spread = math.sqrt(float((q * (1 - q)).sum()) * B * groups)
    if dropped < max(1.0, expected - 6 * spread):
        return tr("the attention weights were dropped in {dropped} of {cases} (batch element, position, head) cases, "
                  "where dropout with p = {p} drops some in about {expected}", dropped=dropped, cases=B * T_q * groups,
                  p=p, expected=format(expected, ".0f"))
    return None


def expect_weights_and_output_dropped(out: torch.Tensor, want: torch.Tensor, near: torch.Tensor) -> None:
    """An attention module's train-mode output at dropout 0.5 (`out`), judged against its output without dropout in
    float64 (`want`) and in float32 (`near`, for the tolerance): finite; about half of it exactly 0 (the dropout on
    wo's output, `resid_dropout`); and what that dropout kept not all twice `want` (the attention weights dropped
    too, `attn_dropout`). Read from the outputs alone, here: no kit code in the worker is asked."""
    assert bool(torch.isfinite(out).all()), (
        tr("in training mode with dropout=0.5 the output holds NaN or inf.")
        + hint_suffix(tr("dropout acts on the attention weights after the softmax, p_attn = "
                         "self.attn_dropout(scores.softmax(dim=-1)): a dropped -inf score is 0 * -inf, NaN."))
    )
    zeros = float((out == 0).double().mean())
    assert 0.3 < zeros < 0.7, (
        tr("in training mode with dropout=0.5, {share} of the outputs are exactly 0, expected about half: the output "
           "of wo is dropped.", share=format(zeros, ".0%"))
        + hint_suffix(tr("return self.resid_dropout(self.wo(out)): resid_dropout acts on what wo gives, after it."))
    )
    # What resid_dropout kept is twice wo's output: twice the output without dropout only where no weight was dropped.
    kept = (out != 0).cpu()
    gap = float((out.double().cpu()[kept] - 2 * want.cpu()[kept]).abs().max())
    assert gap > 2 * tolerance(near, want), (
        tr("with dropout=0.5 in training mode, every output that resid_dropout kept is twice the output without "
           "dropout: the attention weights are not dropped.")
        + hint_suffix(tr("p_attn = self.attn_dropout(scores.softmax(dim=-1)), then p_attn @ v: attn_dropout acts on "
                         "the attention weights."))
    )
