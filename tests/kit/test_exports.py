"""The exports checked against the specifications they are written for.

- `--json`: the kit's own contract (docs/contract.md#the-json-report).
- `--gradescope`: Gradescope's autograder specification, "Output format"
  (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
- `--exercism`: Exercism's test runner interface, version 3
  (https://exercism.org/docs/building/tooling/test-runners/interface).
- `grades.csv`: the `status` column of docs/contract.md#gradescsv.

Each validator returns the list of what breaks its specification, so a failure names every problem.
The graded runs are `attention` only (a correct submission, the stubs, a SyntaxError) and the
capstone under `--quick`, the one exercise with tests that `--quick` skips.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.batch import Entry, Result, records, write_grades_csv
from grader.grade.reports import GradeReport, to_exercism, to_gradescope
from grader.grade.scoring import score
from grader.grade.selection import select

REPO = Path(__file__).resolve().parents[2]
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
# Gradescope's "Output String Formatting": the values a name_format or output_format may take.
FORMATS = ("text", "simple_format", "html", "md", "ansi")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def gradescope_problems(results: dict[str, Any]) -> list[str]:
    """Gradescope's results.json: a top-level score or per-test scores; each key of the documented type."""
    problems = []
    if "score" not in results and not all("score" in t for t in results.get("tests", [])):
        problems.append("score is required at the top level or on every test")
    for key in ("score", "execution_time"):
        if key in results and not _number(results[key]):
            problems.append(f"{key} must be a number, got {results[key]!r}")
    for key in ("output",):
        if key in results and not isinstance(results[key], str):
            problems.append(f"{key} must be a string")
    for key in ("visibility", "stdout_visibility"):
        if key in results and results[key] not in VISIBILITIES:
            problems.append(f"{key} {results[key]!r} is not one of {VISIBILITIES}")
    if "output_format" in results and results["output_format"] not in FORMATS:
        problems.append(f"output_format {results['output_format']!r} is not one of {FORMATS}")
    tests = results.get("tests", [])
    if not isinstance(tests, list):
        return [*problems, "tests must be a list"]
    names = [t.get("name") for t in tests]
    if len(set(names)) != len(names):
        problems.append(f"test names repeat: {sorted({n for n in names if names.count(n) > 1})[:3]}")
    for test in tests:
        where = f"test {test.get('name')!r}"
        for key in ("score", "max_score"):
            if key in test and not _number(test[key]):
                problems.append(f"{where}: {key} must be a number")
        for key in ("name", "output", "number"):
            if key in test and not isinstance(test[key], str):
                problems.append(f"{where}: {key} must be a string")
        if "status" in test and test["status"] not in ("passed", "failed"):
            problems.append(f"{where}: status {test['status']!r} is not passed or failed")
        if "visibility" in test and test["visibility"] not in VISIBILITIES:
            problems.append(f"{where}: visibility {test['visibility']!r}")
        for key in ("name_format", "output_format"):
            if key in test and test[key] not in FORMATS:
                problems.append(f"{where}: {key} {test[key]!r} is not one of {FORMATS}")
        if "tags" in test and not (isinstance(test["tags"], list) and all(isinstance(x, str) for x in test["tags"])):
            problems.append(f"{where}: tags must be a list of strings")
    return problems


def exercism_problems(results: dict[str, Any]) -> list[str]:
    """Exercism's results.json, version 3: top-level version, status, message; per test name, status,
    test_code, message, output, task_id."""
    problems = []
    if results.get("version") != 3:
        problems.append(f"version must be 3, got {results.get('version')!r}")
    status = results.get("status")
    if status not in ("pass", "fail", "error"):
        problems.append(f"status {status!r} is not pass, fail or error")
    message = results.get("message")
    if status == "error":
        if not isinstance(message, str) or not message:
            problems.append("message is required when status is error")
        elif len(message) > 65535:
            problems.append("message is limited to 65535 characters")
    elif message is not None:
        problems.append("message must be null or absent unless status is error")
    tests = results.get("tests")
    if status in ("pass", "fail") and not isinstance(tests, list):
        return [*problems, "tests is required when status is pass or fail"]
    tests = tests or []
    names = [t.get("name") for t in tests]
    if len(set(names)) != len(names):
        problems.append(f"test names repeat: {sorted({n for n in names if names.count(n) > 1})[:3]}")
    statuses = [t.get("status") for t in tests]
    # pass: every test passed; fail: at least one failed or errored; error: none could run.
    if status == "pass" and any(s != "pass" for s in statuses):
        problems.append("status pass with a test that did not pass")
    if status == "fail" and all(s == "pass" for s in statuses):
        problems.append("status fail with every test passing")
    for test in tests:
        where = f"test {test.get('name')!r}"
        if not isinstance(test.get("name"), str):
            problems.append(f"{where}: name must be a string")
        if test.get("status") not in ("pass", "fail", "error"):
            problems.append(f"{where}: status {test.get('status')!r}")
        # test_code MUST be present for Concept Exercises (each exercise here is a task), a string.
        if not isinstance(test.get("test_code"), str) or not test["test_code"]:
            problems.append(f"{where}: test_code must be a non-empty string")
        if test.get("message") is not None and not isinstance(test["message"], str):
            problems.append(f"{where}: message must be a string or null")
        output = test.get("output")
        if output is not None and (not isinstance(output, str) or len(output) > 500):
            problems.append(f"{where}: output must be a string of at most 500 characters")
        if "task_id" in test and not (isinstance(test["task_id"], int) and not isinstance(test["task_id"], bool)):
            problems.append(f"{where}: task_id must be a number")
    return problems


def report_problems(report: dict[str, Any]) -> list[str]:
    """docs/contract.md#the-json-report: keys, types, outcomes, and points that add up."""
    problems = []
    types = {"schema": str, "submission": str, "suite": str, "device": str, "score": float, "max_score": float,
             "duration_s": float, "torch": str, "sandbox": str, "exercises": list}
    for key, kind in types.items():
        value = report.get(key)
        if not (_number(value) if kind is float else isinstance(value, kind)):
            problems.append(f"{key} must be a {kind.__name__}, got {value!r}")
    if report.get("schema") != "grader-report/1":
        problems.append(f"schema {report.get('schema')!r}")
    if problems:
        return problems
    if not math.isclose(report["score"], sum(e["score"] for e in report["exercises"]), abs_tol=1e-6):
        problems.append("score is not the sum of the exercises' scores")
    for exercise in report["exercises"]:
        names = [t["name"] for t in exercise["tests"]]
        if len(set(names)) != len(names):
            problems.append(f"{exercise['id']}: test names repeat")
        for test in exercise["tests"]:
            if test["outcome"] not in ("passed", "failed", "error", "skipped"):
                problems.append(f"{test['name']}: outcome {test['outcome']!r}")
            if not (_number(test["points"]) and _number(test["max_points"]) and isinstance(test["message"], str)):
                problems.append(f"{test['name']}: points, max_points or message of the wrong type")
            elif not 0 <= test["points"] <= test["max_points"]:
                problems.append(f"{test['name']}: {test['points']} points of {test['max_points']}")
        # The tests' maxima add up to the exercise's points, to the 4 decimals they are rounded to.
        total = math.fsum(t["max_points"] for t in exercise["tests"])
        if round(total, 6) != exercise["max_score"]:
            problems.append(f"{exercise['id']}: max_points add up to {total!r}, not {exercise['max_score']}")
        earned = math.fsum(t["points"] for t in exercise["tests"])
        if round(earned, 4) != exercise["score"]:
            problems.append(f"{exercise['id']}: points add up to {earned!r}, not {exercise['score']}")
    return problems


def check(tmp_path: Path, submission: Path, *options: str) -> dict[str, Any]:
    paths = {name: tmp_path / f"{name}.json" for name in ("report", "gradescope", "exercism")}
    run = subprocess.run(
        [sys.executable, "-m", "grader", "check", *options, "--submission", str(submission),
         "--json", str(paths["report"]), "--gradescope", str(paths["gradescope"]),
         "--exercism", str(paths["exercism"])],
        cwd=REPO, capture_output=True, text=True, timeout=180, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {name: json.loads(path.read_text()) for name, path in paths.items()}


def valid(files: dict[str, Any]) -> None:
    problems = [*report_problems(files["report"]),
                *(f"gradescope: {p}" for p in gradescope_problems(files["gradescope"])),
                *(f"exercism: {p}" for p in exercism_problems(files["exercism"]))]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def syntax_error(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("syntax") / "submission"
    shutil.copytree(REPO / "solutions", folder)
    with (folder / "attention.py").open("a") as handle:
        handle.write("\ndef broken(:\n")
    return folder


def test_a_correct_submission_exports_valid_files_with_hidden_tests_as_the_instructor_chose(tmp_path):
    files = check(tmp_path, REPO / "solutions", "attention", "--gradescope-hidden", "hidden")
    valid(files)
    assert files["report"]["score"] == files["report"]["max_score"] == 10
    assert files["exercism"]["status"] == "pass"
    gradescope = files["gradescope"]["tests"]
    suites = {t["name"].split(": ", 1)[1].split("/", 1)[0] for t in gradescope}
    assert suites == {"public", "hidden"}, suites
    assert {t["visibility"] for t in gradescope if ": hidden/" in t["name"]} == {"hidden"}
    assert {t["visibility"] for t in gradescope if ": public/" in t["name"]} == {"visible"}
    assert all(t["output_format"] == "text" for t in gradescope)
    assert math.isclose(sum(t["max_score"] for t in gradescope), 10, abs_tol=1e-9)
    public = [t for t in files["exercism"]["tests"] if ": public/" in t["name"]]
    # The test's own code, as a student reads it in the public suite: each calls the submission (impl), directly or
    # through the file's helpers.
    assert public and all("impl" in t["test_code"] and "not shown" not in t["test_code"] for t in public), public[0]
    hidden = [t for t in files["exercism"]["tests"] if ": hidden/" in t["name"]]
    assert hidden and all("not shown" in t["test_code"] for t in hidden), hidden[0]


def test_the_stubs_export_valid_files_that_fail(tmp_path):
    files = check(tmp_path, REPO / "exercises", "attention")
    valid(files)
    outcomes = {t["outcome"] for e in files["report"]["exercises"] for t in e["tests"]}
    assert outcomes == {"failed"}, outcomes  # unfinished code imports: its tests fail, not error
    assert files["exercism"]["status"] == "fail" and files["exercism"]["message"] is None


def test_a_file_that_does_not_import_is_an_error_everywhere(tmp_path, syntax_error):
    files = check(tmp_path, syntax_error, "attention")
    valid(files)
    outcomes = {t["outcome"] for e in files["report"]["exercises"] for t in e["tests"]}
    assert outcomes == {"error"}, outcomes
    exercism = files["exercism"]
    assert exercism["status"] == "error" and "SyntaxError" in exercism["message"], exercism["message"]
    assert exercism["message"].count("\n") == 0, exercism["message"]  # said once, not once per test
    assert {t["status"] for t in exercism["tests"]} == {"error"}
    assert {t["status"] for t in files["gradescope"]["tests"]} == {"failed"}


def test_a_quick_run_that_skipped_tests_is_never_a_pass(tmp_path):
    files = check(tmp_path, REPO / "solutions", "transformer", "--quick")
    valid(files)
    skipped = [t for e in files["report"]["exercises"] for t in e["tests"] if t["outcome"] == "skipped"]
    assert skipped and all(t["max_points"] > 0 for t in skipped), skipped
    assert files["exercism"]["status"] == "fail"
    quick = [t for t in files["exercism"]["tests"] if "--quick" in (t["message"] or "")]
    assert len(quick) == len(skipped) and {t["status"] for t in quick} == {"fail"}
    gradescope = files["gradescope"]
    assert math.isclose(sum(t["max_score"] for t in gradescope["tests"]), 15, abs_tol=1e-9)
    assert gradescope["score"] < 15


# --- without grading ---------------------------------------------------------------------------


def fake_report(*tests: tuple[str, str, str, float]) -> GradeReport:
    pytest_report = {"tests": [
        {"nodeid": f"tests/{nodeid}", "outcome": outcome,
         "metadata": {"exercise": "attention", "points": points, "message": message}}
        for nodeid, outcome, message, points in tests]}
    return GradeReport("sub", "all", "cpu", 1.0, torch.__version__, tuple(score(pytest_report, ["attention"])))


def test_names_stay_unique_when_two_files_of_a_suite_share_a_function_name():
    report = fake_report(("public/test_attention.py::test_a", "passed", "", 1),
                         ("hidden/test_attention.py::test_a", "passed", "", 1),
                         ("hidden/test_attention_more.py::test_a", "failed", "no", 1))
    for results in (to_gradescope(report), to_exercism(report)):
        names = [t["name"] for t in results["tests"]]
        assert len(set(names)) == 3, names
        assert names[0] == "attention: public/test_a", names


def test_max_points_add_up_exactly_and_unknown_visibilities_are_refused():
    report = fake_report(*((f"public/test_attention.py::test_{i}", "passed", "", 1) for i in range(7)))
    [attention] = report.exercises
    assert round(math.fsum(t.max_points for t in attention.tests), 6) == 10 and attention.score == 10
    assert all(len(repr(t.max_points).split(".")[1]) <= 4 for t in attention.tests)
    with pytest.raises(ValueError, match="visibility"):
        to_gradescope(report, hidden_visibility="later")


def test_grades_csv_names_why_each_zero_is_a_zero(tmp_path):
    selection = select(["attention"], "public")
    rows = []
    for status in ("graded", "refused", "timeout", "failed"):
        rows.append(Result(status, status, {"score": 0.0, "exercises": [], "sandbox": "bubblewrap"}))
    rows.append(Result("again", "skipped", {"score": 0.0, "exercises": [], "status": "timeout"}))
    write_grades_csv(rows, selection, tmp_path / "grades.csv")
    table = {row["id"]: row["status"] for row in csv.DictReader((tmp_path / "grades.csv").open())}
    assert table == {"graded": "graded", "refused": "refused", "timeout": "limit", "failed": "grader-error",
                     "again": "limit"}


def test_a_refused_entry_names_the_device_and_torch_that_would_have_graded_it(tmp_path):
    selection = select(["attention"], "public")
    report = records.empty_report(Entry("bob", tmp_path / "bob.zip"), selection, "auto", "not a zip")
    assert report["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert report["torch"] == torch.__version__
    assert not report_problems(report), report_problems(report)
