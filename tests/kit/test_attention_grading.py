"""The grader's verdicts on `attention`: the reference and honest variants earn 10/10, known mistakes lose points."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = Path(__file__).resolve().parent / "submissions" / "attention"
WRONG = sorted((CATALOGUE / "wrong").glob("*.py"))
CORRECT = sorted((CATALOGUE / "correct").glob("*.py"))
FULL_MARKS = 10.0


def _docstring(path: Path) -> str:
    return path.read_text().split('"""')[1]


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


@pytest.mark.parametrize("submission", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_variant_scores_full_marks(grade, submission: Path):
    run = grade(submission)
    attention = run.exercise("attention")
    assert attention["score"] == attention["max_score"] == FULL_MARKS, (
        f"{_docstring(submission)}\n{run.feedback('attention')}"
    )


@pytest.mark.parametrize("submission", WRONG, ids=[p.stem for p in WRONG])
def test_known_mistake_loses_points_with_feedback(grade, submission: Path):
    run = grade(submission)
    attention = run.exercise("attention")
    assert attention["score"] < FULL_MARKS, f"full marks for a known mistake: {_docstring(submission)}"
    lost = run.lost_tests("attention")
    assert lost, "points were lost, yet every test reports all its points"
    assert all(t["message"].strip() for t in lost), (
        f"a test that took points away says nothing about why:\n{run.feedback('attention')}"
    )


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
