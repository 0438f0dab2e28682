"""Forged verdicts: a submission that rewrites, inside its worker, what the grader asks of it gains nothing.

Each attack in `submissions/forgery/` is a known mistake (kept with the solutions) plus code that runs at
import and rewrites the kit's own code in the worker: the op counter, `describe`, the capstone's training
loop and decoding. Each is graded, inside a copy of the reference solutions, next to the same mistake
without the attack; the attack must score no more than the mistake does, and lose the tests it targets.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.judge import variants

REPO = Path(__file__).resolve().parents[2]
FORGERY = Path(__file__).resolve().parent / "submissions" / "forgery"

# attack folder: (exercise, the mistake it is built on, a test the attack aims to pass)
ATTACKS = {
    "vectorised_by_forged_count": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_redefined_inside_an_if": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_loop_in_a_static_method": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_loop_in_an_operator": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_by_itertools_alias": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_redefined_under_a_forged_main": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_redefined_by_an_annotation": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_loop_over_a_forged_shape": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "vectorised_by_a_bound_method_callback": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "structure_by_forged_describe": ("head_attention", "bias_true", "test_layers_are_key_query_value_without_bias"),
    "capstone_skips_training": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_answers_from_the_table": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_right_only_in_training": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_shadow_model": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
}


def test_every_attack_folder_is_graded_here():
    kinds = ("vectorised", "structure", "capstone")
    assert {p.name for p in FORGERY.iterdir() if p.name.split("_")[0] in kinds} == set(ATTACKS)


@pytest.fixture(scope="module")
def graded(selected_params, warm_grader, tmp_path_factory) -> dict[str, dict]:
    """Each attack this session selects, and each honest mistake under it, graded once inside a copy of the
    solutions, side by side in warm slots; the exercise's result by attack name and by mistake name."""
    files: dict[str, tuple[str, Path]] = {}
    mistakes = tmp_path_factory.mktemp("mistakes")
    for attack in selected_params("attack"):
        exercise, mistake, _ = ATTACKS[attack]
        files[attack] = (exercise, FORGERY / attack / f"{exercise}.py")
        if mistake not in files:
            honest = mistakes / mistake / f"{exercise}.py"
            variants.write(next(m for m in variants.mistakes(exercise) if m.name == mistake), honest.parent)
            files[mistake] = (exercise, honest)
    folders = []
    for name, (exercise, file) in files.items():
        folder = tmp_path_factory.mktemp(name)
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name not in ("__init__.py", "config.py"):
                shutil.copyfile(solution, folder / solution.name)
        shutil.copyfile(file, folder / f"{exercise}.py")
        folders.append((folder, (exercise,)))
    results = {}
    for (name, (exercise, _)), run in zip(files.items(), warm_grader.grade(folders), strict=True):
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        results[name] = run.exercise(exercise)
    return results


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_forged_verdict_scores_no_more_than_the_mistake_it_hides(graded, attack: str):
    exercise, mistake, target = ATTACKS[attack]
    honest, forged = graded[mistake], graded[attack]
    assert honest["score"] < honest["max_score"], f"{mistake} should lose points on its own"
    assert forged["score"] <= honest["score"], (
        f"{attack} scored {forged['score']} in {exercise}, the mistake without the attack {honest['score']}:\n"
        + "\n".join(f"{t['name']}: {t['outcome']}" for t in forged["tests"])
    )
    aimed = [t for t in forged["tests"] if target in t["name"]]
    assert aimed and all(t["outcome"] == "failed" for t in aimed), f"{attack} passed {target}"
