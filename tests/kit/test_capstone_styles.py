"""The capstone is fair to every correct model and still fails the mistakes only training reveals.

Initialisation is not part of the contract: a correct Transformer may start from the reference's N(0, 1/d_model)
embeddings, nn.Embedding's N(0, 1), Xavier everywhere, or nanoGPT's and Hugging Face's N(0, 0.02). Each correct
style of transformer.py in tests/kit is trained here with the hidden test's own settings and task draws
(tests/hidden/test_transformer.py: COPY, SIZES, draw_task) on 12 draws (the slowest style on 5; a style that trains
loss for loss as the reference does on its first draw is the reference's on all), in this process: what is
calibrated is the task and its step budget, not the sandbox, which the catalogue's gradings cross. The training loop
and the decoding are the ones the grading runs (grader/inside/shared/capstone.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import hidden_suite, reference_variant

from grader.inside.shared.capstone import greedy_copy, train_copy
from grader.judge import variants
from grader.judge.variants import Variant

REPO = Path(__file__).resolve().parents[2]
DRAWS = range(12)  # 20 until the kit's tests neared CI's 15 minutes: the first 12 of the 20 every style passed
# Mistakes whose trained model cannot decode the task, whatever else catches them: forward feeds the decoder the
# source (training reads the answer), no positions anywhere (the order of the tokens is lost), cross-attention
# reading the decoder's own stream (the source never reaches the output). A non-causal decoder is caught by the
# capstone's look at the future, not by its accuracy, and a scale or a softmax in the wrong place only slows it.
CAPSTONE_MISTAKES = (("transformer", "decodes_the_source"), ("transformer", "no_positions_at_all"),
                     ("decoder", "cross_attn_reads_x"))

# Slow by nature: 8 styles x 12 draws, each trained until learned (0.3-4.5 s), and three mistakes trained for the
# whole budget of 4000 steps (about 10 s each) or until their loss falls; `-m "not slow"` skips it.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def settings():
    return hidden_suite("transformer")


def _reference() -> Variant:
    return reference_variant("transformer")


def _styles() -> list[Variant]:
    return [_reference(), *variants.correct_variants("transformer")]


def _mistake(exercise: str, name: str) -> Variant:
    return next(m for m in variants.mistakes(exercise) if m.name == name)


@pytest.fixture
def transformer_of(solution_with):
    """The Transformer class of the reference solutions with one file swapped for the variant's."""
    return lambda variant: solution_with(variant, "transformer", "Transformer")


def _trained(settings, transformer, seed: int) -> tuple[float, int, list[float]]:
    """The share of the draw's fresh sequences decoded exactly, the steps trained and their losses, as the hidden
    test trains."""
    _, table, src = settings.draw_task(seed)
    vocab = settings.COPY["vocab"]
    torch.manual_seed(settings.TRAIN_SEED)
    model = transformer(vocab, vocab, **settings.SIZES)
    trained = train_copy(model, table=table, **settings.COPY, seed=settings.TRAIN_SEED)
    accuracy = (greedy_copy(model.eval(), src) == table[src]).all(dim=1).float().mean().item()
    return accuracy, len(trained["losses"]), list(trained["losses"])


# nn.Embedding's own N(0, 1) is the slowest style (1480-1830 of the 4000 steps, about 5 s a draw): 5 draws, not 12.
# It is not the one near the budget's edge: N(0, 0.02), which stalled with d_model 16, trains in 120-190 steps.
SLOW_STYLE_DRAWS = {"default_init_log_softmax_greedy": range(5)}
_REFERENCE_LOSSES: dict[int, list[float]] = {}


def _reference_losses(settings, transformer_of, seed: int) -> list[float]:
    if seed not in _REFERENCE_LOSSES:
        _REFERENCE_LOSSES[seed] = _trained(settings, transformer_of(_reference()), seed)[2]
    return _REFERENCE_LOSSES[seed]


@pytest.mark.parametrize("style", _styles(), ids=lambda v: v.name)
def test_every_correct_style_learns_the_task_on_every_draw(settings, transformer_of, style: Variant):
    transformer = transformer_of(style)
    draws = SLOW_STYLE_DRAWS.get(style.name, DRAWS)
    results = {}
    for seed in draws:
        accuracy, steps, losses = _trained(settings, transformer, seed)
        results[seed] = accuracy, steps
        if style.name == "reference":
            _REFERENCE_LOSSES[seed] = losses
        elif seed == draws[0] and losses == _reference_losses(settings, transformer_of, seed):
            # The reference's initialisation and computation, loss for loss (a greedy loop or a generator written
            # otherwise): it trains as the reference does on every draw, and the reference's own case holds those.
            break
    failed = {seed: result for seed, result in results.items() if result[0] < settings.THRESHOLD}
    assert not failed, f"{style.name}: draws (accuracy, steps) under {settings.THRESHOLD:.0%}: {failed}; all: {results}"


@pytest.mark.parametrize("mistake", CAPSTONE_MISTAKES, ids="/".join)
def test_a_mistake_training_reveals_still_fails(settings, transformer_of, mistake: tuple[str, str]):
    transformer = transformer_of(_mistake(*mistake))
    accuracy, steps, _ = _trained(settings, transformer, 0)
    assert accuracy < settings.THRESHOLD / 2, f"{'/'.join(mistake)} decodes {accuracy:.0%} after {steps} steps"
