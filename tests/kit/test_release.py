"""The release builds: the student distribution keeps the secrets out and still grades; the
autograder bundle grades the reference with every suite.

Each grader here runs with the release folder as its working directory, so `python -m grader`
imports the release's own copy of the grader, which finds its tests next to itself: this grades
the release, not the checkout it was built from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.release import ReleaseError, build

REPO = Path(__file__).resolve().parents[2]
SECRET_FOLDERS = ("solutions", "solutions/mistakes", "tests/hidden", "tests/kit")
CAPSTONE = "hidden/test_transformer.py::test_capstone_trained_model_copies_fresh_sequences"


def grade(release: Path, report: Path, *args: str) -> dict[str, Any]:
    """`python -m grader check ARGS --json REPORT` run inside `release`, as its user would."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", *args, "--json", str(report)],
        cwd=release, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{(done.stderr or done.stdout)[-2000:]}"
    return json.loads(report.read_text())


def scores(report: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {e["id"]: (e["score"], e["max_score"]) for e in report["exercises"]}


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "student"
    written = build(out)
    assert Path("README.md") in written and Path("exercises/attention.py") in written
    return out


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "autograder"
    build(out, autograder=True)
    return out


def test_student_release_holds_no_solutions_or_hidden_tests(student: Path):
    shipped = [path for path in student.rglob("*") if path.is_file()]
    for folder in (*SECRET_FOLDERS, "benchmarks", ".ci", ".git"):
        assert not (student / folder).exists(), f"the student release ships {folder}/"
    # exercises/config.py is given to students complete, so its twin in solutions/ is no secret.
    given = {path.read_bytes() for path in (REPO / "exercises").glob("*.py")}
    secrets = {
        path.read_bytes(): path.relative_to(REPO)
        for folder in ("solutions", "tests/hidden") for path in (REPO / folder).rglob("*.py")
    }
    leaks = [f"{p.relative_to(student)} = {secrets[p.read_bytes()]}" for p in shipped
             if p.read_bytes() in secrets and p.read_bytes() not in given]
    assert not leaks, "the student release holds copies of secret files:\n" + "\n".join(leaks)
    for stub in (REPO / "exercises").glob("*.py"):
        assert (student / "exercises" / stub.name).read_bytes() == stub.read_bytes(), f"{stub.name} differs"
    assert (student / "README.md").read_bytes() == (REPO / "docs" / "student-README.md").read_bytes()
    assert not list(student.rglob("__pycache__")), "the student release ships __pycache__"


def test_student_release_grades_as_a_student_would(student: Path, tmp_path: Path):
    found = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"],
                           cwd=student, capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()).is_relative_to(student), f"imported {found.stdout} instead of the release's"

    stubs = grade(student, tmp_path / "stubs.json")
    assert stubs["suite"] == "public"
    assert stubs["score"] == 0, scores(stubs)

    for solution in (REPO / "solutions").glob("*.py"):
        if solution.name not in ("__init__.py", "config.py"):
            shutil.copyfile(solution, student / "exercises" / solution.name)
    try:
        solved = grade(student, tmp_path / "solved.json")
    finally:  # the other tests share this release: put the stubs back
        for stub in (REPO / "exercises").glob("*.py"):
            shutil.copyfile(stub, student / "exercises" / stub.name)
    assert solved["suite"] == "public"
    assert all(score == top > 0 for score, top in scores(solved).values()), scores(solved)


def test_autograder_bundle_grades_the_reference_with_every_suite(autograder: Path, tmp_path: Path):
    for folder in ("solutions", "tests/hidden"):
        assert any((autograder / folder).glob("*.py")), f"the autograder bundle has no {folder}/"
    mistakes = sorted(p.relative_to(REPO) for p in (REPO / "solutions" / "mistakes").rglob("*.py"))
    assert mistakes and all((autograder / p).is_file() for p in mistakes), "the bundle lacks the mistakes to diagnose"
    for folder in ("tests/kit", "benchmarks", ".ci", ".git"):
        assert not (autograder / folder).exists(), f"the autograder bundle ships {folder}/"
    assert (autograder / "README.md").read_bytes() == (REPO / "README.md").read_bytes()

    report = grade(autograder, tmp_path / "report.json", "--submission", str(REPO / "solutions"), "--quick")
    assert report["suite"] == "all"
    for exercise_id, (score, top) in scores(report).items():
        if exercise_id != "transformer":
            assert score == top > 0, f"{exercise_id}: {score}/{top}"
    transformer = next(e for e in report["exercises"] if e["id"] == "transformer")
    lost = [(t["name"], t["outcome"]) for t in transformer["tests"] if t["outcome"] != "passed"]
    assert lost == [(CAPSTONE, "skipped")], lost


def test_build_refuses_a_folder_that_is_not_empty_or_inside_the_kit(tmp_path: Path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(ReleaseError, match="not empty"):
        build(tmp_path / "taken")
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    for inside in ("exercises/release", "tests/release"):
        with pytest.raises(ReleaseError, match="inside the kit"):
            build(REPO / inside)
        assert not (REPO / inside).exists()
    (tmp_path / "empty").mkdir()
    assert build(tmp_path / "empty") and build(tmp_path / "new" / "autograder", autograder=True)
