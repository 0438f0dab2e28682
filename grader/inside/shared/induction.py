"""`induction` is the task a submitted TinyGPT must learn: continue a sequence by copying what followed its last token.

A row is `period` distinct random tokens repeated to the row's length, with the period drawn per row: once a token
comes round again, the next token is the one that followed it last time, which only an induction head (a head that
finds the earlier occurrence of the current token and copies its successor) can tell; no fixed offset works for
every row. Training runs in the worker (`train_induction`: hundreds of optimizer steps cannot each be a round trip
across the sandbox boundary) on rows it draws from the seed the trusted side sends. Everything that decides points
happens in the trusted process: it draws the held-out rows and feeds them to the model itself (`cached_logits`, one
call on each row's prompt, then one token per call with the cache the model returned), so no prediction is made by
a call that was given a token after the one it predicts; and it computes the accuracy from the logits that came back.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from .capstone import (  # the first capstone's: a wrong kind of value (said in English for the trusted side), a step
    N_,
    Misshapen,
    descend,
    settled,
)


def induction_batch(generator: torch.Generator, *, batch: int, length: int, vocab: int,
                    periods: tuple[int, int] | list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, length) rows and their (batch,) periods: each row `period` distinct tokens of 0..vocab-1, repeated;
    the period drawn per row from periods[0]..periods[1]."""
    low, high = periods
    period = torch.randint(low, high + 1, (batch,), generator=generator)  # (B,)
    tokens = torch.rand(batch, vocab, generator=generator).argsort(dim=1)[:, :high]  # (B, high): distinct per row
    column = torch.arange(length).unsqueeze(0) % period.unsqueeze(1)  # (B, length): t mod the row's period
    return tokens.gather(1, column), period


def predictable(period: torch.Tensor, length: int) -> torch.Tensor:
    """(B, length - 1) bool: the logits at position t predict token t + 1, which an induction head can tell once t
    is a repeat (t >= period): what followed the current token last time."""
    return torch.arange(length - 1).unsqueeze(0) >= period.unsqueeze(1)


def train_induction(
    model: torch.nn.Module, *, rows: dict[str, Any], steps: int, batch: int, lr: float, seed: int,
    stop_below: float | None = None, window: int = 20,
) -> dict[str, Any]:
    """Next-token training with AdamW on fresh rows each step (`rows`: induction_batch's vocab, length and periods);
    the loss counts the predictable positions only.

    Stops early once the mean loss of the last `window` steps is under `stop_below`: the model has learned the task
    by then, and whether it really did is judged afterwards by the trusted side, on rows the worker never saw.
    Stops at once on a loss that is not a number: the weights are then NaN too.
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    model.train()
    losses = []
    started = time.perf_counter()
    for _ in range(steps):
        tokens, period = induction_batch(generator, batch=batch, **rows)
        tokens, keep = tokens.to(device), predictable(period, tokens.size(1)).to(device)
        logits, _ = model(tokens[:, :-1])  # (B, length - 1, vocab): the token after each position
        loss = F.cross_entropy(logits[keep], tokens[:, 1:][keep])
        losses.append(descend(model, optimizer, loss))
        if settled(losses, stop_below, window):
            break
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - started}


@torch.no_grad()
def cached_logits(model: Any, rows: torch.Tensor, prompt: int) -> torch.Tensor:
    """(B, length - 1, vocab): the logits after each token of `rows`, from one call on rows[:, :prompt] and then one
    call per further token, each with the cache the previous call returned (`model(token, cache)`).

    `model` is a local module or a handle on the submission's: a call is given only the tokens up to the one whose
    successor it predicts, so it cannot read the answer.
    """
    batch, length = rows.shape
    logits, cache = _call(model(rows[:, :prompt]), batch, prompt)
    steps = [logits]
    for t in range(prompt, length - 1):
        logits, cache = _call(model(rows[:, t:t + 1], cache), batch, 1)
        steps.append(logits)
    return torch.cat(steps, dim=1)


def _call(value: Any, batch: int, tokens: int) -> tuple[torch.Tensor, Any]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Misshapen(N_("the model returned a {type}: expected a pair (logits, cache)"), type=type(value).__name__)
    logits, cache = value
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or tuple(logits.shape[:2]) != (batch, tokens):
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise Misshapen(N_("called with {tokens} token(s) per row of a batch of {batch}, the model returned logits "
                           "{shape}: expected ({batch}, {tokens}, vocab)"), tokens=tokens, batch=batch, shape=shape)
    return logits.detach(), cache
