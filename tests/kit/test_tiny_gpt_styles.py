"""The second capstone is fair to every correct TinyGPT and still fails the mistakes only training reveals.

Initialisation and layout are not part of the contract: a correct TinyGPT may start from PyTorch's defaults (the
reference), nanoGPT's N(0, 0.02) with its head tied to tok_embed or not, Meta's llama as torchtitan trains it, or
Hugging Face's LlamaForCausalLM. Each correct style of tiny_gpt.py in tests/kit is trained here with the hidden
test's own settings and task draws (tests/hidden/test_tiny_gpt.py: TASK, TRAINING, THRESHOLD, draw_task), with the
grading's loop (grader/inside/shared/induction.py) and its held-out rows fed one token per call with the cache: the
test's calibration, in this process (the catalogue's gradings leave the capstone out for tiny_gpt's variants). A
style that trains loss for loss as the reference does on its first draw is the reference's on all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import hidden_suite, reference_variant

from grader.inside.shared.induction import cached_logits, train_induction
from grader.judge import variants
from grader.judge.variants import Variant

REPO = Path(__file__).resolve().parents[2]
# Mistakes whose trained model cannot continue fresh rows one token at a time: without a causal mask, training
# reads the token it predicts, which a call on one token cannot.
CAPSTONE_MISTAKES = ("no_causal_mask",)

# Slow by nature: each style trained until it learns (about 30 s of one core in all, the tied head half of it).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def settings():
    return hidden_suite("tiny_gpt")


def _reference() -> Variant:
    return reference_variant("tiny_gpt")


def _styles() -> list[Variant]:
    return [_reference(), *variants.correct_variants("tiny_gpt")]


@pytest.fixture
def tiny_gpt_of(solution_with):
    """The TinyGPT class of the reference solutions with tiny_gpt.py swapped for the variant's."""
    return lambda variant: solution_with(variant, "tiny_gpt", "TinyGPT")


def _trained(settings, tiny_gpt, seed: int) -> tuple[float, int, list[float]]:
    """The share of the draw's held-out predictions right, the steps trained and their losses, as the hidden test
    trains and judges."""
    train_seed, rows, period, prompt = settings.draw_task(seed)
    torch.manual_seed(train_seed)
    model = tiny_gpt(settings.TASK["vocab"], max_seq_len=settings.TASK["length"])
    trained = train_induction(model, rows=settings.TASK, **settings.TRAINING, seed=train_seed)
    accuracy = settings.accuracy(cached_logits(model.eval(), rows, prompt), rows, period)
    return accuracy, len(trained["losses"]), list(trained["losses"])


# One draw each: the hidden test's comment has each style's figures on three, with the margin to the budget and the
# threshold (the slowest, the tied head, stops at 423-1058 of 2000 steps); the tied head alone costs 11-15 s here.
DRAWS = range(1)
_REFERENCE_LOSSES: dict[int, list[float]] = {}


def _reference_losses(settings, tiny_gpt_of, seed: int) -> list[float]:
    if seed not in _REFERENCE_LOSSES:
        _REFERENCE_LOSSES[seed] = _trained(settings, tiny_gpt_of(_reference()), seed)[2]
    return _REFERENCE_LOSSES[seed]


@pytest.mark.parametrize("style", _styles(), ids=lambda v: v.name)
def test_every_correct_style_learns_the_task(settings, tiny_gpt_of, style: Variant):
    tiny_gpt = tiny_gpt_of(style)
    results = {}
    for seed in DRAWS:
        accuracy, steps, losses = _trained(settings, tiny_gpt, seed)
        results[seed] = accuracy, steps
        if style.name == "reference":
            _REFERENCE_LOSSES[seed] = losses
        elif seed == DRAWS[0] and losses == _reference_losses(settings, tiny_gpt_of, seed):
            break  # the reference's initialisation and computation, loss for loss: its own case holds the draws
    failed = {seed: result for seed, result in results.items() if result[0] < settings.THRESHOLD}
    assert not failed, f"{style.name}: draws (accuracy, steps) under {settings.THRESHOLD:.0%}: {failed}; all: {results}"


@pytest.mark.parametrize("mistake", CAPSTONE_MISTAKES)
def test_a_mistake_training_reveals_still_fails(settings, tiny_gpt_of, mistake: str):
    tiny_gpt = tiny_gpt_of(next(m for m in variants.mistakes("tiny_gpt") if m.name == mistake))
    accuracy, steps, _ = _trained(settings, tiny_gpt, 0)
    assert accuracy < settings.THRESHOLD * 0.75, f"tiny_gpt/{mistake} predicts {accuracy:.0%} after {steps} steps"
