"""The grader's verdicts on the reference (full marks) and the stubs (zero), and its usage errors.

The catalogue of correct and wrong variants is graded in test_catalogue_grading.py."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FULL_MARKS = 10.0


def test_reference_solution_scores_full_marks(grade):
    run = grade(REPO / "solutions")
    attention = run.exercise("attention")
    assert attention["max_score"] == FULL_MARKS
    assert attention["score"] == FULL_MARKS, run.feedback("attention")


def test_unfilled_stub_scores_zero(grade):
    run = grade(REPO / "exercises")
    attention = run.exercise("attention")
    assert attention["score"] == 0
    assert attention["tests"], "a stub that scores 0 should still be shown which tests it failed"


def test_missing_submission_path_is_a_one_line_usage_error(grader_cli, tmp_path: Path):
    run = grader_cli.check(tmp_path / "no-such-submission", tmp_path / "report.json")
    assert run.returncode == 2, run.describe()
    assert "Traceback" not in run.stdout + run.stderr, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{run.stderr}"


def test_unknown_exercise_is_a_one_line_usage_error(grader_cli, tmp_path: Path):
    run = grader_cli.check(REPO / "solutions", tmp_path / "report.json", exercise="no_such_exercise")
    assert run.returncode == 2, run.describe()
    assert "Traceback" not in run.stdout + run.stderr, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{run.stderr}"
