"""The grader's verdicts on every exercise's catalogue: honest variants keep full marks, known
mistakes lose points in the exercise they break, and say why.

`submissions/<exercise>/correct/*.py` and `submissions/<exercise>/wrong/*.py` are whole
alternative `<exercise>.py` files. Each is graded inside a copy of the reference solutions with
only that one file swapped in, so a mistake is judged on its own, the way a student's lone slip is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
EXERCISES = sorted(p.name for p in SUBMISSIONS.iterdir() if (p / "wrong").is_dir() or (p / "correct").is_dir())


def variants(kind: str) -> list[Path]:
    return sorted(path for exercise in EXERCISES for path in (SUBMISSIONS / exercise / kind).glob("*.py"))


def _id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


def _docstring(path: Path) -> str:
    return path.read_text().split('"""')[1].strip()


@pytest.fixture
def grade_variant(grader_cli, tmp_path: Path):
    def _grade(variant: Path):
        exercise = variant.parent.parent.name
        folder = tmp_path / "submission"
        folder.mkdir()
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name not in ("__init__.py", "config.py"):
                shutil.copyfile(solution, folder / solution.name)
        shutil.copyfile(variant, folder / f"{exercise}.py")
        run = grader_cli.check(folder, tmp_path / "report.json", exercise)
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        return exercise, run

    return _grade


@pytest.mark.parametrize("variant", variants("correct"), ids=_id)
def test_correct_variant_keeps_full_marks(grade_variant, variant: Path):
    exercise, run = grade_variant(variant)
    result = run.exercise(exercise)
    assert result["score"] == result["max_score"], f"{_docstring(variant)}\n{run.feedback(exercise)}"


@pytest.mark.parametrize("variant", variants("wrong"), ids=_id)
def test_known_mistake_loses_points_and_says_why(grade_variant, variant: Path):
    exercise, run = grade_variant(variant)
    result = run.exercise(exercise)
    assert result["score"] < result["max_score"], f"full marks for a known mistake: {_docstring(variant)}"
    lost = run.lost_tests(exercise)
    assert all(t["message"].strip() for t in lost), f"a lost test says nothing:\n{run.feedback(exercise)}"
