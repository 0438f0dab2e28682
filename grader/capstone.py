"""`capstone` trains a submitted Transformer on a copy task with the kit's own loop, in the worker.

The loop is the kit's code, but it must run where the model lives: thousands of optimizer steps
cannot each be a round trip across the sandbox boundary. It only uses the contract's API
(`forward`, `encode`, `decode`, `generator`). The trusted side chooses the seed and the fresh test
sequences and judges the decoded tokens itself; a submission that tampers with this loop only
changes how its own model was trained, never how it is judged.

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


def copy_batch(generator: torch.Generator, *, batch: int, length: int, vocab: int) -> torch.Tensor:
    """(batch, length) random data tokens: the source a model must copy."""
    return torch.randint(FIRST_DATA_TOKEN, vocab, (batch, length), generator=generator)


def train_copy(
    model: torch.nn.Module, *, vocab: int, length: int, steps: int, batch: int, lr: float, seed: int,
    warmup: int = 50, stop_below: float | None = None, window: int = 20,
) -> dict[str, Any]:
    """Teacher-forced training on copying: predict [s1..sL] from [START, s1..s(L-1)] and the source.

    Stops early once the mean loss of the last `window` steps is under `stop_below`: the model has
    learned the task by then (the reference gets under 0.05 in about 160 of 800 steps), and whether it
    really copies is judged afterwards, on fresh sequences, by the trusted side. Stops at once on a
    loss that is not a number: the weights are then NaN too, and no further step can mend them.
    """
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    optimizer = _adam(list(model.parameters()), lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    model.train()
    losses = []
    started = time.perf_counter()
    for _ in range(steps):
        src = copy_batch(generator, batch=batch, length=length, vocab=vocab).to(device)
        start = torch.full((batch, 1), START, dtype=src.dtype, device=device)
        tgt_in = torch.cat([start, src[:, :-1]], dim=1)  # (B, L): the decoder sees the answer shifted
        logits = model(src, tgt_in)  # (B, L, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), src.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            break
        if stop_below is not None and len(losses) >= window and sum(losses[-window:]) / window < stop_below:
            break
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - started}


def _adam(parameters: list[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Adam as in "Attention Is All You Need"; the fused kernel where the parameters allow it (3x faster here)."""
    settings = {"lr": lr, "betas": (0.9, 0.98), "eps": 1e-9}
    try:
        return torch.optim.Adam(parameters, **settings, fused=True)
    except (RuntimeError, ValueError):  # e.g. parameters on a device or of a dtype the fused kernel lacks
        return torch.optim.Adam(parameters, **settings, foreach=True)


@torch.no_grad()
def greedy_copy(model: torch.nn.Module, src: torch.Tensor) -> torch.Tensor:
    """The kit's own greedy decoding through encode/decode/generator: (B, L) predicted tokens."""
    model.eval()
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), START, dtype=src.dtype, device=src.device)
    for _ in range(src.size(1)):
        out = model.decode(memory, ys)  # (B, t, d_model)
        next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_token.to(ys.dtype)], dim=1)
    return ys[:, 1:]
