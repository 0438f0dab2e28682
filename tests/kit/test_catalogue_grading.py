"""The grader's verdicts on every exercise's catalogue: honest variants keep full marks, known
mistakes lose points in the exercise they break, and say why.

The correct variants (`submissions/<exercise>/correct/`) and the known mistakes (`solutions/mistakes/`,
kept with the solutions because they are near-solutions that must never ship), as
`grader.judge.variants` builds them, are whole alternative `<exercise>.py` files. Each is graded
inside a copy of the reference solutions with only that one file swapped in, so a mistake is judged
on its own, the way a student's lone slip is, and the feedback must name that mistake (its
DIAGNOSIS), once. A correct variant keeps full marks in its own exercise and in every exercise built
on it (a float32 softmax from the course notes must not cost points in the float64 test of the whole
Transformer), all but the capstone's training for the exercises the Transformer builds on. Held-out
mistakes (`submissions/<exercise>/held_out.py`), realistic slips kept out of the catalogue, lose points in
their exercise and are told no known mistake's name. Every known mistake also loses points in the public
suite (read from the full grading, whose public tests score as `--suite public` alone does: one mistake of
each exercise is graded both ways to show it): a release student, who has only the public suite, is never
told "done" with a common mistake. That correct code is never diagnosed is checked
in-process, cheaply, in test_diagnosis.py.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.curriculum import EXERCISES, prerequisites
from grader.judge import variants
from grader.judge.plugin import QUICK_SKIP
from grader.judge.variants import Variant

REPO = Path(__file__).resolve().parents[2]
# Slow by nature: 176 variants graded, two at a time (about three minutes on two cores), and one mistake of each
# exercise again with --suite public; `-m "not slow"` skips it.
pytestmark = pytest.mark.slow


def correct_variants() -> list[Variant]:
    return [variant for exercise in EXERCISES for variant in variants.correct_variants(exercise.id)]


def mistakes() -> list[Variant]:
    return [variant for exercise in EXERCISES for variant in variants.mistakes(exercise.id)]


def held_out_mistakes() -> list[Variant]:
    return [variant for exercise in EXERCISES for variant in variants.held_out_mistakes(exercise.id)]


CORRECT = frozenset((v.exercise, v.name, str(v.origin)) for v in correct_variants())


def exercise_of(variant: Variant) -> str:
    return variant.exercise


def _id(variant: Variant) -> str:
    return f"{variant.exercise}/{variant.name}"


def _docstring(variant: Variant) -> str:
    return (ast.get_docstring(ast.parse(variant.source)) or "").strip()


def _diagnosis(variant: Variant) -> str:
    """The mistake's DIAGNOSIS, the sentence a student who makes it should read."""
    assert variant.diagnosis, f"{_id(variant)} ({variant.origin}) needs a diagnosis"
    return variant.diagnosis


def _key(variant: Variant) -> tuple[str, str, str]:
    return variant.exercise, variant.name, str(variant.origin)


def _graded_exercises(variant: Variant) -> tuple[str, ...]:
    """A mistake is graded on its own exercise; a correct variant also on every exercise built on it."""
    if _key(variant) not in CORRECT:
        return (exercise_of(variant),)
    return (exercise_of(variant), *(e.id for e in EXERCISES if exercise_of(variant) in prerequisites(e.id)))


@pytest.fixture(scope="module")
def submission_of(tmp_path_factory) -> Callable[[Variant], Path]:
    """The submission folder of a variant: the reference solutions with that one file swapped in, written once and
    graded from there by every run that reads it (the full suites' and the public suite's)."""
    base = tmp_path_factory.mktemp("catalogue")
    folders: dict[tuple[str, str, str], Path] = {}

    def folder_of(variant: Variant) -> Path:
        if _key(variant) not in folders:
            folder = base / f"{len(folders)}-{variant.exercise}"
            folder.mkdir()
            for solution in (REPO / "solutions").glob("*.py"):
                if solution.name not in ("__init__.py", "config.py"):
                    shutil.copyfile(solution, folder / solution.name)
            variants.write(variant, folder)
            folders[_key(variant)] = folder
        return folders[_key(variant)]

    return folder_of


@pytest.fixture(scope="module")
def catalogue_runs(selected_params, warm_grader, submission_of) -> dict[tuple[str, str, str], object]:
    """Every variant this session's tests read, each graded once, side by side in warm slots."""
    chosen = {_key(v): v for v in [*selected_params("variant"), *selected_params("sampled")]}
    folders = [(submission_of(variant), _graded_exercises(variant)) for variant in chosen.values()]
    quick = [_without_the_capstone(variant) for variant in chosen.values()]
    return dict(zip(chosen, warm_grader.grade(folders, quick=quick), strict=True))


@pytest.fixture(scope="module")
def public_runs(selected_params, warm_grader, submission_of) -> dict[tuple[str, str, str], object]:
    """The sampled mistakes this session's tests read, graded with --suite public, as a release student grades them
    (tests/hidden is not shipped), from the same folders as the full grading."""
    chosen = {_key(v): v for v in selected_params("sampled")}
    folders = [(submission_of(mistake), (mistake.exercise,)) for mistake in chosen.values()]
    return dict(zip(chosen, warm_grader.grade(folders, suite="public"), strict=True))


def _without_the_capstone(variant: Variant) -> bool:
    """Graded with --quick, which leaves out the one slow test, the capstone's training:

    - a correct variant of an exercise the Transformer builds on: the Transformer's other tests hold its forward
      pass and every gradient to the float64 golden within float32's rounding, so it trains as the reference does;
    - a mistake: what is checked is that it loses points in tests that ran and says why (the skipped capstone
      counts as lost in a --quick run, so `_diagnoses_of_a_lost_exercise` asks for a test that failed); a mistake
      only the capstone could catch would fail there, and need the capstone graded.

    The capstone is graded for the reference and the Transformer's own correct variants, which must clear it."""
    return variant.exercise != "transformer" or _key(variant) not in CORRECT


@pytest.fixture
def grade_variant(catalogue_runs):
    def _grade(variant: Variant):
        run = catalogue_runs[_key(variant)]
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        return exercise_of(variant), run

    return _grade


@pytest.mark.parametrize("variant", correct_variants(), ids=_id)
def test_correct_variant_keeps_full_marks(grade_variant, variant: Variant):
    exercise, run = grade_variant(variant)
    for graded in _graded_exercises(variant):
        result = run.exercise(graded)
        left_out = [t for t in result["tests"] if t["outcome"] == "skipped" and QUICK_SKIP in t["message"]]
        assert not left_out or _without_the_capstone(variant), f"{_id(variant)}: tests left out of a full grading"
        assert all(t["outcome"] == "passed" for t in result["tests"] if t not in left_out), (
            f"{_docstring(variant)}\n{run.feedback(graded)}")
        assert result["score"] == pytest.approx(result["max_score"] - sum(t["max_points"] for t in left_out)), (
            f"{_docstring(variant)}\n{run.feedback(graded)}")


@pytest.mark.parametrize("variant", mistakes(), ids=_id)
def test_known_mistake_loses_points_and_says_why(grade_variant, variant: Variant):
    exercise, run = grade_variant(variant)
    named = _diagnoses_of_a_lost_exercise(run, variant)
    assert named == [f"Diagnosis: {_diagnosis(variant)}"], (
        f"expected the one diagnosis of {_id(variant)}, got {named}:\n{run.feedback(exercise)}"
    )
    # The report names it too, for grades.csv and the class report: by the catalogue's name, in its exercise only.
    assert {e["id"]: e["diagnosed"] for e in run.report["exercises"] if e["diagnosed"]} == {exercise: [variant.name]}


@pytest.mark.parametrize("variant", mistakes(), ids=_id)
def test_known_mistake_loses_points_in_the_public_suite(grade_variant, variant: Variant):
    """A student of the release has only the public suite and stops when it says done: every common mistake must
    cost points there already. The hidden suite adds edge cases, shapes and robustness; no check of a common mistake
    needs to stay hidden (docs/scoring.md, "What the public suite judges"), so none is excused here. Read from the
    public tests of the full grading, which score as `--suite public` alone does (the next test, on a sample)."""
    exercise, run = grade_variant(variant)
    public = [t for t in run.exercise(exercise)["tests"] if t["name"].startswith("public/")]
    assert public, [t["name"] for t in run.exercise(exercise)["tests"]]
    assert sum(t["points"] for t in public) < sum(t["max_points"] for t in public), (
        f"full marks in the public suite for {_id(variant)}: {_docstring(variant)}\n{run.feedback(exercise)}")


def public_sample() -> list[Variant]:
    """The first known mistake of each exercise: graded again with `--suite public` alone."""
    return [next(iter(variants.mistakes(exercise.id))) for exercise in EXERCISES if variants.mistakes(exercise.id)]


@pytest.mark.parametrize("sampled", public_sample(), ids=_id)
def test_the_public_suite_alone_scores_as_the_full_grading_does(public_runs, grade_variant, sampled: Variant):
    """`grader check --suite public`, as a release student runs it, gives each public test the outcome the full
    grading gives it, and runs nothing else: what the previous test reads from the full grading. (Points differ: an
    exercise's points are shared among the tests that run.)"""
    run = public_runs[_key(sampled)]
    assert run.returncode == 0, run.describe()
    assert not run.report_problems(), "\n".join(run.report_problems())
    assert run.report["suite"] == "public", run.report["suite"]
    alone = {t["name"]: t["outcome"] for t in run.exercise(sampled.exercise)["tests"]}
    exercise, full = grade_variant(sampled)
    within = {t["name"]: t["outcome"] for t in full.exercise(exercise)["tests"] if t["name"].startswith("public/")}
    assert alone == within, f"{_id(sampled)}: --suite public {alone}\nfull grading {within}"
    assert run.exercise(exercise)["score"] < run.exercise(exercise)["max_score"], run.feedback(exercise)


@pytest.mark.parametrize("variant", held_out_mistakes(), ids=_id)
def test_held_out_mistake_loses_points_and_is_told_no_wrong_cause(grade_variant, variant: Variant):
    """A realistic slip kept out of the catalogue loses points, says why in every lost test, and is never given a
    known mistake's name (test_diagnosis checks the same in-process)."""
    exercise, run = grade_variant(variant)
    named = _diagnoses_of_a_lost_exercise(run, variant)
    assert not named, f"{_id(variant)} told {named}:\n{run.feedback(exercise)}"
    assert not any(e["diagnosed"] for e in run.report["exercises"]), run.report["exercises"]


# Every hint that claims a cause from what the output matches (grader/judge/claims.py), by a phrase of its English
# text, and the variants that make that mistake: no other may be told it; each of these is told it.
CLAIMS: dict[str, frozenset[str]] = {
    "It matches the output when the embeddings are not multiplied by sqrt(d_model).": frozenset({
        "transformer/embeddings_not_scaled", "transformer/only_the_source_embeddings_scaled"}),
    "It matches the output when the embeddings are multiplied by d_model instead of sqrt(d_model).": frozenset({
        "transformer/scaled_by_d_model"}),
    "It matches the output when the positional encoding is not added.": frozenset({
        "transformer/no_positions_at_all", "transformer/no_positions_on_target"}),
    "It matches the output when the embeddings are multiplied by sqrt(d_model) after the positions": frozenset({
        "transformer/embeddings_scaled_after_the_positions"}),
    "your embeddings are not scaled at all.": frozenset({"transformer/embeddings_not_scaled"}),
    "your embeddings are scaled by d_model, not sqrt(d_model).": frozenset({"transformer/scaled_by_d_model"}),
    "your embeddings are scaled by sqrt(d_model) after the positions": frozenset({
        "transformer/embeddings_scaled_after_the_positions"}),
    "that is post-norm": frozenset({"sublayers/post_norm"}),
    "Yours sum to 1 over the vocabulary": frozenset({"transformer/softmax_before_returning_logits"}),
    "a frozen row, as padding_idx": frozenset({"transformer/padding_idx_on_the_embeddings"}),
    "a frozen column, as a mask": frozenset(),
    "the weights are the softmax over the keys times": frozenset(),
    "row sums to the same": frozenset({"attention/scaled_after_the_softmax"}),
    "It matches the output of the half-split pairing": frozenset({"rope/half_split_pairing"}),
    "It matches the output of a rotation the other way": frozenset({"rope/rotates_backwards"}),
    "It matches the output when every call's tokens are rotated at positions 0 .. T-1": frozenset({
        "kv_cache/positions_not_offset"}),
    "It matches the output when the causal triangle is not shifted": frozenset({"kv_cache/mask_not_offset"}),
}


@pytest.mark.parametrize("variant", [*mistakes(), *held_out_mistakes()], ids=_id)
def test_a_claimed_cause_is_the_mistake_made(grade_variant, variant: Variant):
    """A hint that says the output matches some mistake fires only for a submission that made it (issue 47): every
    catalogued and held-out mistake's messages, from the gradings above (none of its own), read for each claim. A
    held-out mistake is told its claims; a catalogued one reads its diagnosis in the hints' place."""
    exercise, run = grade_variant(variant)
    told = {claim for claim in CLAIMS for t in run.lost_tests(exercise) if claim in t["message"]}
    wrong = {claim for claim in told if _id(variant) not in CLAIMS[claim]}
    assert not wrong, f"{_id(variant)} told a cause it did not make, {sorted(wrong)}:\n{run.feedback(exercise)}"
    if variant.diagnosis is not None:
        return
    missing = {claim for claim, made in CLAIMS.items() if _id(variant) in made} - told
    assert not missing, f"{_id(variant)} not told {sorted(missing)}:\n{run.feedback(exercise)}"


def _diagnoses_of_a_lost_exercise(run, variant: Variant) -> list[str]:
    """The Diagnosis lines of the variant's exercise, which it must have lost points in, every lost test saying why."""
    exercise = exercise_of(variant)
    result = run.exercise(exercise)
    assert result["score"] < result["max_score"], f"full marks for a mistake: {_docstring(variant)}"
    lost = run.lost_tests(exercise)
    assert any(t["outcome"] in ("failed", "error") for t in lost), (
        f"only the tests a --quick run skips were lost: {_docstring(variant)}\n{run.feedback(exercise)}")
    assert all(t["message"].strip() for t in lost), f"a lost test says nothing:\n{run.feedback(exercise)}"
    return [line for t in lost for line in t["message"].splitlines() if line.startswith("Diagnosis: ")]
