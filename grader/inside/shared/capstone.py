"""`capstone` is the kit's task a submitted Transformer must learn: copying through a secret code.

The task is drawn at grading time: a random derangement `table` of the data tokens (no token maps to
itself), and the answer to a source sequence is `table[src]`, so a model that only echoes its input
copies nothing. Training runs in the worker (`train_copy`: thousands of optimizer steps cannot each be
a round trip across the sandbox boundary), and the worker sees the table's effect in its training
data. Everything that decides points happens in the trusted process: it draws the table and the fresh
test sequences, runs the greedy decoding loop itself (`greedy_copy`, calling the model's `encode`,
`decode` and `generator` through handles, one step at a time), and runs the kit's reference
Transformer on the weights the model learned. A submission that replaces this module's training loop
in the worker only changes how its own model was trained.

Tokens: 0 is padding (unused here), 1 the start symbol, 2..vocab-1 the data.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

START = 1
FIRST_DATA_TOKEN = 2


def N_(message: str, /) -> str:
    """Marks a message for the catalog (as grader.lang.N_ does: this module, shared with the worker, imports
    nothing of the grader's)."""
    return message


class Misshapen(AssertionError):
    """A call of the model returned the wrong kind of value: an English template and its fields, which the trusted
    side translates (grader.testing.greedy_copy)."""

    def __init__(self, template: str, **fields: Any) -> None:
        super().__init__(template.format(**fields))
        self.template, self.fields = template, fields


def derangement(generator: torch.Generator, vocab: int) -> torch.Tensor:
    """(vocab,) lookup table: padding and start map to themselves, each data token to another data token."""
    data = vocab - FIRST_DATA_TOKEN
    if data < 2:
        raise ValueError(f"a vocabulary of {vocab} has fewer than two data tokens to swap")
    while True:  # about 1 draw in e (2.7) is a derangement
        order = torch.randperm(data, generator=generator)
        if not bool((order == torch.arange(data)).any()):
            break
    return torch.cat([torch.arange(FIRST_DATA_TOKEN), order + FIRST_DATA_TOKEN])


def copy_batch(generator: torch.Generator, *, batch: int, length: int, vocab: int) -> torch.Tensor:
    """(batch, length) random data tokens: the source sequences."""
    return torch.randint(FIRST_DATA_TOKEN, vocab, (batch, length), generator=generator)


def train_copy(
    model: torch.nn.Module, *, table: torch.Tensor, vocab: int, length: int, steps: int, batch: int, lr: float,
    seed: int, warmup: int = 50, stop_below: float | None = None, window: int = 20,
) -> dict[str, Any]:
    """Teacher-forced training: predict [t1..tL] = table[src] from [START, t1..t(L-1)] and the source.

    Stops early once the mean loss of the last `window` steps is under `stop_below`: the model has
    learned the task by then (the reference gets under 0.05 in about 160 of 800 steps), and whether it
    really learned it is judged afterwards, on fresh sequences, by the trusted side. Stops at once on a
    loss that is not a number: the weights are then NaN too, and no further step can mend them.
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    table = table.to(device)
    optimizer = _adam(list(model.parameters()), lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    model.train()
    losses = []
    started = time.perf_counter()
    for _ in range(steps):
        src = copy_batch(generator, batch=batch, length=length, vocab=vocab).to(device)
        tgt = table[src]
        logits = model(src, shifted(tgt))  # (B, L, vocab): the decoder sees the answer shifted right
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
        losses.append(descend(model, optimizer, loss))
        schedule.step()
        if settled(losses, stop_below, window):
            break
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - started}


def descend(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> float:
    """One optimizer step on `loss`, its gradients clipped to norm 1; the loss, as a float. (Both capstones' step.)"""
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    optimizer.step()
    return loss.item()


def settled(losses: list[float], stop_below: float | None, window: int) -> bool:
    """Whether training stops now: on a loss that is not a number (the weights are NaN too, no step can mend them),
    or once the mean loss of the last `window` steps is under `stop_below`."""
    if not math.isfinite(losses[-1]):
        return True
    return stop_below is not None and len(losses) >= window and sum(losses[-window:]) / window < stop_below


def shifted(tgt: torch.Tensor) -> torch.Tensor:
    """[START, t1..t(L-1)]: what the decoder reads when it must predict [t1..tL]."""
    start = torch.full((tgt.size(0), 1), START, dtype=tgt.dtype, device=tgt.device)
    return torch.cat([start, tgt[:, :-1]], dim=1)


def _adam(parameters: list[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Adam as in "Attention Is All You Need"; the fused kernel where the parameters allow it (3x faster here)."""
    settings = {"lr": lr, "betas": (0.9, 0.98), "eps": 1e-9}
    try:
        return torch.optim.Adam(parameters, **settings, fused=True)
    except (RuntimeError, ValueError):  # e.g. parameters on a device or of a dtype the fused kernel lacks
        return torch.optim.Adam(parameters, **settings, foreach=True)


@torch.no_grad()
def greedy_copy(model: Any, src: torch.Tensor) -> torch.Tensor:
    """The kit's greedy decoding through encode/decode/generator: (B, L) predicted tokens.

    `model` is a local module or a handle on the submission's: with a handle, each step is a call into
    the worker that returns logits, and the choice of the next token is made here.
    """
    batch = src.size(0)
    memory = _tensor(model.encode(src), "encode(src)", batch)
    ys = torch.full((batch, 1), START, dtype=src.dtype, device=src.device)
    for step in range(1, src.size(1) + 1):
        out = _tensor(model.decode(memory, ys), "decode(memory, ys)", batch, dims=3)  # (B, t, d_model)
        if out.size(1) != step:
            raise Misshapen(N_("decode(memory, ys) with ys of shape {ys} returned shape {shape}: one output per target "
                               "position, (B, t, d_model)"), ys=tuple(ys.shape), shape=tuple(out.shape))
        logits = _tensor(model.generator(out[:, -1]), "generator(out[:, -1])", batch, dims=2)  # (B, vocab)
        ys = torch.cat([ys, logits.argmax(dim=-1, keepdim=True).to(ys.dtype)], dim=1)
    return ys[:, 1:]


def _tensor(value: Any, what: str, batch: int, dims: int | None = None) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.size(0) != batch:
        if isinstance(value, torch.Tensor):
            raise Misshapen(N_("{what} returned shape {shape}: expected a tensor with the batch ({batch}) first"),
                            what=what, shape=tuple(value.shape), batch=batch)
        raise Misshapen(N_("{what} returned a {type}: expected a tensor with the batch ({batch}) first"), what=what,
                        type=type(value).__name__, batch=batch)
    if dims is not None and value.dim() != dims:
        raise Misshapen(N_("{what} returned shape {shape}: expected {dims} dimensions"), what=what,
                        shape=tuple(value.shape), dims=dims)
    return value.detach()
