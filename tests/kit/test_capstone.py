"""The capstone's task and training loop (grader/inside/shared/capstone.py): the loop runs in the worker, the
decoding here."""

from __future__ import annotations

import math

import torch

from grader.inside.shared.capstone import FIRST_DATA_TOKEN, START, derangement, greedy_copy, shifted, train_copy

IDENTITY = torch.arange(10)
SETTINGS = {"vocab": 10, "length": 6, "steps": 800, "batch": 32, "lr": 0.1, "seed": 0}


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
    result = train_copy(Copier(10), table=IDENTITY, **SETTINGS, stop_below=0.01)
    assert 20 <= len(result["losses"]) < 800
    assert sum(result["losses"][-20:]) / 20 < 0.01


def test_training_stops_at_the_first_loss_that_is_not_a_number():
    result = train_copy(Copier(10, broken=True), table=IDENTITY, **SETTINGS)
    assert len(result["losses"]) == 1 and math.isnan(result["losses"][0])


def test_the_task_is_a_derangement_of_the_data_tokens_drawn_afresh():
    tables = [derangement(torch.Generator().manual_seed(seed), 10) for seed in range(20)]
    for table in tables:
        assert table[:FIRST_DATA_TOKEN].tolist() == list(range(FIRST_DATA_TOKEN))  # padding and start stay
        assert sorted(table.tolist()) == list(range(10))
        assert not bool((table[FIRST_DATA_TOKEN:] == torch.arange(FIRST_DATA_TOKEN, 10)).any())
    assert len({tuple(t.tolist()) for t in tables}) > 15


def test_a_table_model_learns_the_coded_task_and_greedy_copy_decodes_it_step_by_step():
    table = derangement(torch.Generator().manual_seed(3), 10)
    model = Decoding(table)
    src = torch.randint(FIRST_DATA_TOKEN, 10, (5, 6))
    assert torch.equal(greedy_copy(model, src), table[src])
    assert model.steps == [1, 2, 3, 4, 5, 6]  # decode saw one more target token at each step
    assert torch.equal(shifted(table[src])[:, 0], torch.full((5,), START))


class Decoding(torch.nn.Module):
    """encode/decode/generator that answer from the table: what greedy_copy asks of a model."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table, self.steps = table, []

    def encode(self, src):
        return torch.nn.functional.one_hot(self.table[src], 10).float()

    def decode(self, memory, ys):
        self.steps.append(ys.size(1))
        return memory[:, : ys.size(1)]

    def generator(self, out):
        return out
