"""Measured only when it cannot tell: a submission that recognises the calls dropout rates are measured with, and drops
as asked only in them, gains nothing.

Each attack in `submissions/forgery/rates_*` is a known mistake (kept with the solutions) that behaves as the contract
says only when a call carries a mark the rate measurement (grader/judge/rates.py) once left on it: a sublayer handed to
ResidualConnection that returns one constant (it was torch.ones_like), attention scores that are all small (query and
key weights scaled by 0.2). The feed-forward's marks (a bias all in [0.5, 1.5], a column of w2 orthogonal to every
other) are test_forged_verdicts's `dropout_right_only_when_traced`. Each attack is graded inside a copy of the reference
solutions, next to the same mistake without the attack, in warm bubblewrap slots: the attack must score no more than
the mistake does, and fail the tests it aims at. The measurement's calls themselves are held to the other tests' in
test_dropout_rates.py (`test_a_feed_forwards_measurement_loads_weights_drawn_as_nn_linear_draws_them`,
`test_a_residuals_measurement_hands_it_an_ordinary_sublayer`,
`test_attentions_measurement_gives_it_scores_as_large_as_the_golden_tests_do`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.judge import variants

# Slow: six gradings of one exercise each (about ten seconds on two cores).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FORGERY = Path(__file__).resolve().parent / "submissions" / "forgery"

# attack folder: (exercise, the mistake it is built on, the tests it aims to pass)
ATTACKS = {
    "rates_residual_honest_under_a_constant_sublayer": (
        "sublayers", "dropout_before_sublayer",
        ("test_dropout_drops_with_the_probability_it_was_given[ResidualConnection-0.3]",
         "test_residual_dropout_acts_on_the_sublayer_output")),
    "rates_head_honest_under_small_scores": (
        "head_attention", "dropout_on_output",
        ("hidden/test_head_attention.py::test_dropout_drops_with_the_probability_it_was_given[0.3]",)),
    "rates_heads_honest_under_small_scores": (
        "multi_head_attention", "fixed_attention_dropout",
        ("public/test_multi_head_attention.py::test_dropout_drops_with_the_probability_it_was_given[0.3]",)),
}


def test_every_rates_attack_folder_is_graded_here():
    assert {p.name for p in FORGERY.iterdir() if p.name.startswith("rates_")} == set(ATTACKS)


@pytest.fixture(scope="module")
def graded(warm_grader, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Each attack's and each control's report of its exercise, by folder or mistake name."""
    folders: dict[str, tuple[str, Path]] = {}
    for attack, (exercise, mistake, _) in ATTACKS.items():
        for name in (attack, mistake):
            folder = tmp_path_factory.mktemp(name)
            for solution in (REPO / "solutions").glob("*.py"):
                if solution.name not in ("__init__.py", "config.py"):
                    shutil.copyfile(solution, folder / solution.name)
            if name == attack:
                shutil.copyfile(FORGERY / attack / f"{exercise}.py", folder / f"{exercise}.py")
            else:
                variants.write(next(m for m in variants.mistakes(exercise) if m.name == mistake), folder)
            folders[name] = (exercise, folder)
    runs = warm_grader.grade([(folder, (exercise,)) for exercise, folder in folders.values()])
    reports = {}
    for (name, (exercise, _)), run in zip(folders.items(), runs, strict=True):
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        (reports[name],) = [e for e in run.report["exercises"] if e["id"] == exercise]
    return reports


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_module_honest_only_under_an_old_measurement_mark_gains_nothing(graded, attack: str):
    _, mistake, targets = ATTACKS[attack]
    honest, forged = graded[mistake], graded[attack]
    assert honest["score"] < honest["max_score"], f"{mistake} should lose points on its own"
    assert forged["score"] <= honest["score"], (
        f"{attack} scored {forged['score']}, the mistake without the attack {honest['score']}:\n"
        + "\n".join(f"{t['name']}: {t['outcome']}" for t in forged["tests"]))
    for target in targets:
        aimed = [t for t in forged["tests"] if target in t["name"]]
        assert aimed and all(t["outcome"] == "failed" for t in aimed), f"{attack} passed {target}"
