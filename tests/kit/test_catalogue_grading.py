"""The grader's verdicts on every exercise's catalogue: honest variants keep full marks, known
mistakes lose points in the exercise they break, and say why.

`submissions/<exercise>/correct/*.py` and `solutions/mistakes/<exercise>/*.py` (the known mistakes,
kept with the solutions because they are near-solutions that must never ship) are whole
alternative `<exercise>.py` files. Each is graded inside a copy of the reference solutions with
only that one file swapped in, so a mistake is judged on its own, the way a student's lone slip is,
and the feedback must name that mistake (its DIAGNOSIS), once. A correct variant keeps full marks in
its own exercise and in every exercise built on it (a float32 softmax from the course notes must not
cost points in the float64 test of the whole Transformer). That correct code is never diagnosed
is checked in-process, cheaply, in test_diagnosis.py.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from grader.curriculum import EXERCISES, prerequisites

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
MISTAKES = REPO / "solutions" / "mistakes"


def correct_variants() -> list[Path]:
    return sorted(SUBMISSIONS.glob("*/correct/*.py"))


def mistakes() -> list[Path]:
    return sorted(MISTAKES.glob("*/*.py"))


def exercise_of(variant: Path) -> str:
    return variant.parent.parent.name if variant.parent.name == "correct" else variant.parent.name


def _id(path: Path) -> str:
    return f"{exercise_of(path)}/{path.stem}"


def _docstring(path: Path) -> str:
    return path.read_text().split('"""')[1].strip()


def _diagnosis(path: Path) -> str:
    """The mistake's DIAGNOSIS, the sentence a student who makes it should read."""
    found = [ast.literal_eval(node.value) for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DIAGNOSIS"]]
    assert len(found) == 1 and isinstance(found[0], str), f"{path} needs one DIAGNOSIS = '...' string"
    return found[0]


@pytest.fixture
def grade_variant(grader_cli, tmp_path: Path):
    def _grade(variant: Path, *also: str):
        exercise = exercise_of(variant)
        folder = tmp_path / "submission"
        folder.mkdir()
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name not in ("__init__.py", "config.py"):
                shutil.copyfile(solution, folder / solution.name)
        shutil.copyfile(variant, folder / f"{exercise}.py")
        run = grader_cli.check(folder, tmp_path / "report.json", exercise, *also)
        assert run.returncode == 0, run.describe()
        assert not run.report_problems(), "\n".join(run.report_problems())
        return exercise, run

    return _grade


@pytest.mark.parametrize("variant", correct_variants(), ids=_id)
def test_correct_variant_keeps_full_marks(grade_variant, variant: Path):
    built_on_it = [e.id for e in EXERCISES if exercise_of(variant) in prerequisites(e.id)]
    exercise, run = grade_variant(variant, *built_on_it)
    for graded in (exercise, *built_on_it):
        result = run.exercise(graded)
        assert result["score"] == result["max_score"], f"{_docstring(variant)}\n{run.feedback(graded)}"


@pytest.mark.parametrize("variant", mistakes(), ids=_id)
def test_known_mistake_loses_points_and_says_why(grade_variant, variant: Path):
    exercise, run = grade_variant(variant)
    result = run.exercise(exercise)
    assert result["score"] < result["max_score"], f"full marks for a known mistake: {_docstring(variant)}"
    lost = run.lost_tests(exercise)
    assert all(t["message"].strip() for t in lost), f"a lost test says nothing:\n{run.feedback(exercise)}"
    named = [line for t in lost for line in t["message"].splitlines() if line.startswith("Diagnosis: ")]
    assert named == [f"Diagnosis: {_diagnosis(variant)}"], (
        f"expected the one diagnosis of {_id(variant)}, got {named}:\n{run.feedback(exercise)}"
    )
