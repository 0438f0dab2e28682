"""`branches` checks how often a layer drops each of its sublayers' outputs, seen one sublayer at a time.

The parts' traces (`rates`) see every dropout inside MultiHeadAttention, FeedForward and ResidualConnection;
a dropout a layer adds of its own (on the attention output inside the residual's lambda, on the memory, a
second one on the feed-forward's output) sits between them. `branch_weights` makes an encoder or decoder
layer output one sublayer's contribution alone, as a value per head or position that each dropout after
it keeps or drops feature by feature; `expect_branch_dropped` counts how many dropouts did.
"""

from __future__ import annotations

import math

import torch

from grader.judge.expect import expect_tensor
from grader.judge.tracers import SPREAD, VALUE_RTOL


def branch_weights(reference: torch.nn.Module, live: str) -> dict[str, torch.Tensor]:
    """Weights, by the reference layer's names, under which an encoder or decoder layer fed x = 0 (and memory =
    ones) outputs only what its sublayer `live` ("self_attn", "cross_attn" or "feed_forward") adds, a value
    shared by each head's features (attention: equal scores, values of ones) or by a position's features (the
    feed-forward: hidden units of 1, averaged by w2), times whatever dropout acts on each feature after it.
    Every residual's norm gives ones; the other sublayers give 0."""
    weights = {}
    for name, p in reference.named_parameters():
        sublayer = name.split(".")[-3] if name.count(".") >= 2 else ""
        leaf = ".".join(name.split(".")[-2:])
        if name.endswith("norm.weight") or leaf in ("wq.weight", "wk.weight", "w1.weight", "w2.bias"):
            value = torch.zeros_like(p)
        elif name.endswith("norm.bias") or leaf == "w1.bias":
            value = torch.ones_like(p)
        elif leaf == "wv.weight":
            value = torch.eye(*p.shape)
        elif leaf == "wo.weight":
            value = torch.eye(*p.shape) if sublayer == live else torch.zeros_like(p)
        elif leaf == "w2.weight":
            value = torch.full_like(p, 1 / p.shape[1]) if live == "feed_forward" else torch.zeros_like(p)
        else:
            value = p.detach()
        weights[name] = value.detach().to(p.dtype)
    return weights


def expect_branch_dropped(out: torch.Tensor, *, groups: int, p: float, chained: int, what: str, hint: str) -> None:
    """Fail as feedback unless `out` (B, T, d), a sublayer's contribution under `branch_weights`, was dropped
    feature by feature by `chained` dropouts with probability p: within each of the `groups` (heads, or 1) of
    a position the kept features are equal, and the share of dropped ones is 1 - (1 - p) ** chained."""
    values = expect_tensor(out, name=what).detach().double()
    values = values.reshape(*values.shape[:-1], groups, values.shape[-1] // groups).flatten(0, -2)
    if not bool(values.isfinite().all()):
        raise AssertionError(f"{what} holds NaN or inf where every value is finite. Hint: {hint}")
    live = values.ne(0).any(dim=-1)
    kept = values[live]
    top = kept.abs().amax(dim=-1, keepdim=True)
    spread = torch.where(kept != 0, kept, kept.sum(-1, keepdim=True) / kept.ne(0).sum(-1, keepdim=True))
    if bool((spread.amax(-1) - spread.amin(-1) > VALUE_RTOL * top[..., 0]).any()):
        raise AssertionError(f"{what}: the features of one {'head' if groups > 1 else 'position'} came out "
                             "different where dropout can only keep or drop each of them: something drops inside "
                             f"the sublayer's input (the memory, say). Hint: {hint}")
    # A group all of whose features were dropped is not seen (its sublayer output may have been 0 itself):
    # among the groups seen, each of g features is dropped with probability q, given that not all g were.
    q, g = 1 - (1 - p) ** chained, kept.shape[-1]
    share = (q - q**g) / (1 - q**g)
    dropped, seen = int(kept.eq(0).sum()), kept.numel()
    if abs(dropped - seen * share) > SPREAD * math.sqrt(seen * q * (1 - q)) + 0.5:
        raise AssertionError(f"{what} dropped {dropped} of {seen} features ({dropped / seen:.0%}), where "
                             f"{chained} dropout(s) with p = {p} in a row drop about {share:.0%} (of the features "
                             f"of {'heads' if groups > 1 else 'positions'} that kept any). Hint: {hint}")
