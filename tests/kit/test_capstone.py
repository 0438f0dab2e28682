"""The capstone's training loop (grader/capstone.py), which runs in the worker on the student's model."""

from __future__ import annotations

import math

import torch

from grader.capstone import train_copy


class Copier(torch.nn.Module):
    """Logits from a table indexed by the source token: can learn the copy task, or break it."""

    def __init__(self, vocab: int, broken: bool = False) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(vocab, vocab))
        self.broken = broken

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        logits = self.table[src]
        return logits / 0.0 * 0.0 if self.broken else logits  # 0/0: NaN everywhere


def test_training_stops_once_the_mean_loss_is_below_the_bar():
    result = train_copy(Copier(10), vocab=10, length=6, steps=800, batch=32, lr=0.1, seed=0, stop_below=0.01)
    assert 20 <= len(result["losses"]) < 800
    assert sum(result["losses"][-20:]) / 20 < 0.01


def test_training_stops_at_the_first_loss_that_is_not_a_number():
    result = train_copy(Copier(10, broken=True), vocab=10, length=6, steps=800, batch=32, lr=0.1, seed=0)
    assert len(result["losses"]) == 1 and math.isnan(result["losses"][0])
