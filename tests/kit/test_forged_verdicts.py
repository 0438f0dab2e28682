"""Forged verdicts: a submission that rewrites, inside its worker, what the grader asks of it gains nothing, at any
isolation tier.

Each attack in `submissions/forgery/` is a known mistake (kept with the solutions) plus code that runs at
import and rewrites the kit's own code in the worker: the op counter, `describe`, the capstone's training
loop and decoding, the helpers dropout rates were once measured with. Each is graded, inside a copy of the
reference solutions, next to the same mistake without the attack; the attack must score no more than the
mistake does, and lose the tests it targets.
The forged protocol frames (`protocol_*`, each beside `protocol_baseline`) are graded at bubblewrap by
test_forgery_protocol, and here below it.

Below bubblewrap (`user` and `none`, as a root grader without namespaces meets them: see `TierGraders`), no
namespace stands between a worker and the grader any more, only a user of its own, seccomp and Landlock, or less.
Each tier grades its whole set, attacks and controls, in one warm batch of its own, and every report must name
the tier that graded it, since a grader that cannot start a tier falls back to a weaker one by itself.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.judge import variants

# Slow: every attack and its control at three tiers, five of them training the capstone at each (about 50 s).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FORGERY = Path(__file__).resolve().parent / "submissions" / "forgery"
TIERS = ("bubblewrap", "user", "none")

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
    "vectorised_by_an_unrolled_padded_loop": ("masking", "loop_over_positions", "test_causal_average_is_vectorised"),
    "structure_by_forged_describe": ("head_attention", "bias_true", "test_layers_are_key_query_value_without_bias"),
    "capstone_skips_training": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_answers_from_the_table": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_right_only_in_training": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "capstone_shadow_model": ("transformer", "decodes_the_source", "test_capstone_trained_model_copies"),
    "dropout_right_only_when_traced": ("sublayers", "feed_forward_fixed_dropout",
                                       "test_dropout_drops_with_the_probability_it_was_given[FeedForward"),
}

# Correct attention plus a forged frame on the worker's reply pipe (see test_forgery_protocol).
PROTOCOL_BASELINE = "protocol_baseline"
PROTOCOL_ATTACKS = sorted(p.name for p in FORGERY.glob("protocol_*") if p.is_dir() and p.name != PROTOCOL_BASELINE)
PROTOCOL_TIERS = ("user", "none")  # bubblewrap: test_forgery_protocol, with the command line graded cold
EVERY_IMPORT = {"protocol_deep_json_at_import"}  # strikes at every import: no test of the exercise can pass
BLAME = "broke the grader's protocol"


def test_every_attack_folder_is_graded_here():
    kinds = ("vectorised", "structure", "capstone", "dropout")
    assert {p.name for p in FORGERY.iterdir() if p.name.split("_")[0] in kinds} == set(ATTACKS)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory) -> dict[str, tuple[str, Path]]:
    """Every submission graded here, by name: its exercise and its folder.

    An attack on an exercise, and the honest mistake under it, each inside a copy of the solutions; the
    protocol attacks and their baseline as they are."""
    files: dict[str, tuple[str, Path]] = {}
    mistakes = tmp_path_factory.mktemp("mistakes")
    for attack, (exercise, mistake, _) in ATTACKS.items():
        files[attack] = (exercise, FORGERY / attack / f"{exercise}.py")
        if mistake not in files:
            honest = mistakes / mistake / f"{exercise}.py"
            variants.write(next(m for m in variants.mistakes(exercise) if m.name == mistake), honest.parent)
            files[mistake] = (exercise, honest)
    folders = {}
    for name, (exercise, file) in files.items():
        folder = tmp_path_factory.mktemp(name)
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name not in ("__init__.py", "config.py"):
                shutil.copyfile(solution, folder / solution.name)
        shutil.copyfile(file, folder / f"{exercise}.py")
        folders[name] = (exercise, folder)
    for name in (PROTOCOL_BASELINE, *PROTOCOL_ATTACKS):
        folders[name] = ("attention", FORGERY / name)
    return folders


def _under(attack: str) -> str:
    """The attack-free control an attack is graded beside."""
    return ATTACKS[attack][1] if attack in ATTACKS else PROTOCOL_BASELINE


@pytest.fixture(scope="module")
def graded(selected_params, tier_graders, submissions) -> Callable[[str, str], dict[str, Any]]:
    """The report of a submission at a tier, as `graded(tier, name)`.

    Each tier's batch grades, side by side in warm slots, every attack this session selects at that tier and the
    control under each; a tier this machine cannot produce skips the tests asked of it. A report is handed out
    only if its grading went by the contract and it names the tier that graded it."""
    wanted: dict[str, list[str]] = {}
    for tier, attack in zip(selected_params("tier"), selected_params("attack"), strict=True):
        names = wanted.setdefault(tier, [])
        names += [name for name in (attack, _under(attack)) if name not in names]
    # The capstone's training is most of a batch's time: started first, it does not end the batch alone.
    reachable = {tier: sorted(names, key=lambda name: submissions[name][0] != "transformer")
                 for tier, names in wanted.items() if tier_graders.problem(tier) is None}
    requests = {tier: [(submissions[name][1], (submissions[name][0],)) for name in names]
                for tier, names in reachable.items()}
    runs = {(tier, name): run for tier, tier_runs in tier_graders.grade(requests).items()
            for name, run in zip(reachable[tier], tier_runs, strict=True)}

    def report(tier: str, name: str) -> dict[str, Any]:
        if (problem := tier_graders.problem(tier)) is not None:
            pytest.skip(f"no {tier} tier here: {problem}")
        run = runs[tier, name]
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        assert run.report["sandbox"] == tier, f"{name} was graded at {run.report['sandbox']!r}, not at {tier!r}"
        if tier != "bubblewrap":
            assert run.report["warnings"][0].startswith(f"sandbox: {tier}, not bubblewrap"), run.report["warnings"]
        return run.report

    return report


def _exercise(report: dict[str, Any], exercise: str) -> dict[str, Any]:
    found = [e for e in report["exercises"] if e["id"] == exercise]
    assert len(found) == 1, f"report lists exercise {exercise!r} {len(found)} times"
    return found[0]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("tier", TIERS)
def test_a_forged_verdict_scores_no_more_than_the_mistake_it_hides(graded, tier: str, attack: str):
    exercise, mistake, target = ATTACKS[attack]
    honest, forged = _exercise(graded(tier, mistake), exercise), _exercise(graded(tier, attack), exercise)
    assert honest["score"] < honest["max_score"], f"{mistake} should lose points on its own"
    assert forged["score"] <= honest["score"], (
        f"{attack} scored {forged['score']} in {exercise} at {tier}, the mistake without the attack "
        f"{honest['score']}:\n" + "\n".join(f"{t['name']}: {t['outcome']}" for t in forged["tests"])
    )
    aimed = [t for t in forged["tests"] if target in t["name"]]
    assert aimed and all(t["outcome"] == "failed" for t in aimed), f"{attack} passed {target} at {tier}"


@pytest.mark.parametrize("attack", PROTOCOL_ATTACKS)
@pytest.mark.parametrize("tier", PROTOCOL_TIERS)
def test_a_forged_frame_costs_points_only_where_it_struck_below_bubblewrap(graded, tier: str, attack: str):
    baseline = {t["name"]: t for t in _exercise(graded(tier, PROTOCOL_BASELINE), "attention")["tests"]}
    assert all(t["outcome"] == "passed" for t in baseline.values()), f"{PROTOCOL_BASELINE} lost points at {tier}"
    report = graded(tier, attack)
    tests = {t["name"]: t for t in _exercise(report, "attention")["tests"]}
    assert tests.keys() == baseline.keys(), "the attack changed which tests ran"
    assert report["score"] <= sum(t["points"] for t in baseline.values()), f"{attack} raised its score at {tier}"
    lost = [name for name, test in tests.items()
            if (test["outcome"], test["points"]) != (baseline[name]["outcome"], baseline[name]["points"])]
    for name in lost:
        assert BLAME in tests[name]["message"], f"{name} lost points without blaming the forgery:\n" \
                                                f"{tests[name]['message']}"
    if attack in EVERY_IMPORT:
        assert len(lost) == len(tests), "\n".join(f"{n}: {t['outcome']}" for n, t in tests.items())
    else:  # one forgery, one victim: every later test is answered by its own reply, as for the baseline
        assert len(lost) == 1, f"{attack}: {len(lost)} tests lost points at {tier}: {lost}"
