"""`branches` checks how often a layer drops each of its sublayers' outputs, seen one sublayer at a time.

The parts' traces (`rates`) see every dropout inside MultiHeadAttention, FeedForward and ResidualConnection;
a dropout a layer adds of its own (on the attention output inside the residual's lambda, on the memory, a
second one on the feed-forward's output) sits between them. `branch_weights` makes an encoder or decoder
layer output one sublayer's contribution alone, as a value per head or position that each dropout after
it keeps or drops feature by feature; `expect_branch_dropped` counts how many dropouts did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from grader.judge.expect import expect_tensor, hint_suffix
from grader.judge.tracers import SPREAD, VALUE_RTOL
from grader.lang import tr

BRANCHES = {  # per layer, each sublayer and the dropouts after it: attention's after wo, then the residual's
    "EncoderLayer": {"self_attn": 2, "feed_forward": 1},
    "DecoderLayer": {"self_attn": 2, "cross_attn": 2, "feed_forward": 1},
}


def branch_weights(parameters: Mapping[str, torch.Tensor], live: str) -> dict[str, torch.Tensor]:
    """Weights, by the layer's parameter names (their shapes and dtypes are all that is read), under which an
    encoder or decoder layer fed x = 0 (and memory = ones) outputs only what its sublayer `live` ("self_attn",
    "cross_attn" or "feed_forward") adds: a value shared by each head's features (attention: equal scores,
    values of ones) or by a position's features (the feed-forward: hidden units of 1, averaged by w2), times
    whatever dropout acts on each feature after it. Every residual's norm gives ones; the other sublayers 0."""
    weights = {}
    for name, p in parameters.items():
        sublayer = name.split(".")[-3] if name.count(".") >= 2 else ""
        leaf = ".".join(name.split(".")[-2:])
        if name.endswith("norm.bias") or leaf == "w1.bias":
            value = torch.ones(p.shape)
        elif leaf == "wv.weight" or (leaf == "wo.weight" and sublayer == live):
            value = torch.eye(*p.shape)
        elif leaf == "w2.weight" and live == "feed_forward":
            value = torch.full(p.shape, 1 / p.shape[1])
        else:  # the norms' weights, wq, wk, w1, the other sublayers' wo and w2, biases
            value = torch.zeros(p.shape)
        weights[name] = value.to(p.dtype)
    return weights


def branch_verdict(out: torch.Tensor, *, groups: int, p: float, chained: int) -> tuple[str, str]:
    """How `out` (B, T, d), a sublayer's contribution under `branch_weights`, was dropped: ("once", "") when
    feature by feature by `chained` dropouts with probability p (within each of the `groups` of a position, heads
    or 1, the kept features equal, the share dropped 1 - (1 - p) ** chained); else "nan", "uneven", "more" or
    "fewer", with what to tell the student."""
    values = out.detach().double()
    values = values.reshape(*values.shape[:-1], groups, values.shape[-1] // groups).flatten(0, -2)
    if not bool(values.isfinite().all()):
        return "nan", tr("holds NaN or inf where every value is finite")
    kept = values[values.ne(0).any(dim=-1)]
    top = kept.abs().amax(dim=-1)
    filled = torch.where(kept != 0, kept, kept.sum(-1, keepdim=True) / kept.ne(0).sum(-1, keepdim=True))
    if bool((filled.amax(-1) - filled.amin(-1) > VALUE_RTOL * top).any()):
        return "uneven", (tr("the features of one head came out different where dropout can only keep or drop each "
                             "of them: something drops inside the sublayer's input (the memory, say)") if groups > 1
                          else tr("the features of one position came out different where dropout can only keep or "
                                  "drop each of them: something drops inside the sublayer's input (the memory, say)"))
    # A group all of whose features were dropped is not seen (its sublayer output may have been 0 itself):
    # among the groups seen, each of g features is dropped with probability q, given that not all g were.
    q, g = 1 - (1 - p) ** chained, kept.shape[-1]
    share = (q - q**g) / (1 - q**g)
    dropped, seen = int(kept.eq(0).sum()), kept.numel()
    if abs(dropped - seen * share) <= SPREAD * math.sqrt(seen * q * (1 - q)) + 0.5:
        return "once", ""
    fields = {"dropped": dropped, "seen": seen, "rate": f"{dropped / seen:.0%}", "chained": chained, "p": p,
              "share": f"{share:.0%}"}
    return ("more" if dropped > seen * share else "fewer"), (
        tr("dropped {dropped} of {seen} features ({rate}), where {chained} dropout(s) with p = {p} in a row drop "
           "about {share} (of the features of heads that kept any)", **fields) if groups > 1
        else tr("dropped {dropped} of {seen} features ({rate}), where {chained} dropout(s) with p = {p} in a row drop "
                "about {share} (of the features of positions that kept any)", **fields))


def expect_branch_dropped(out: torch.Tensor, *, groups: int, p: float, chained: int, what: str, hint: str) -> None:
    """Fail as feedback unless `out`, a sublayer's contribution under `branch_weights`, was dropped feature by
    feature by `chained` dropouts with probability p (`branch_verdict`)."""
    what, hint = tr(what), tr(hint)  # the suites write English (grader.extract)
    verdict, message = branch_verdict(expect_tensor(out, name=what), groups=groups, p=p, chained=chained)
    if verdict != "once":
        raise AssertionError(tr("{what} {why}.", what=what, why=message) + hint_suffix(hint))
