"""`grader check --timeout`: one time budget for the whole run, so a slow submission cannot stretch a check.

A submission whose every call sleeps just under the per-call limit would otherwise take that long
for each of its tests. With a budget, the tests left when it runs out fail with "time budget of
N s used up", tests that passed keep their points, and the check still completes (exit 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STALLING = REPO / "tests" / "kit" / "submissions" / "stalling"
CORRECT = REPO / "tests" / "kit" / "submissions" / "attention" / "correct" / "einsum.py"
SLEEP_S = 4  # what the stalling submission sleeps in every call
SLACK_S = 15  # starting the grader and writing the report, on a busy machine


def _all_tests(run) -> list[dict]:
    return [test for exercise in run.report["exercises"] for test in exercise["tests"]]


def test_a_stalling_submission_uses_up_the_budget_not_the_graders_time(grader_cli, tmp_path: Path):
    run = grader_cli.check(STALLING, tmp_path / "report.json", "attention", "--timeout", "10")
    assert run.returncode == 0, run.describe()
    assert run.report is not None, f"no report written to --json\n{run.describe()}"
    assert not run.report_problems(), "report breaks the contract:\n" + "\n".join(run.report_problems())
    tests = _all_tests(run)
    assert len(tests) * SLEEP_S > 10 + SLACK_S, "too few tests for the budget to show"
    assert run.seconds < 10 + SLACK_S, f"a 10 s budget took {run.seconds:.1f} s\n{run.describe()}"

    assert run.report["score"] == 0, run.describe()
    assert run.report["budget_exhausted"] is True and run.report["time_budget_s"] == 10
    assert any("time budget of 10 s used up" in warning for warning in run.report["warnings"]), run.report["warnings"]
    assert all(test["outcome"] == "failed" and test["points"] == 0 for test in tests), run.feedback("attention")
    not_run = [test for test in tests if test["message"] == "time budget of 10 s used up: this test was not run"]
    assert len(not_run) >= len(tests) - 3, run.feedback("attention")
    # A call cut short by the budget is not the student's endless loop, and costs the function no strike.
    feedback = run.feedback("attention")
    assert "endless loop" not in feedback and "was not called again" not in feedback, feedback
    assert "Total" in run.stdout and "time budget of 10 s used up" in run.stdout, run.describe()


def test_tests_that_passed_before_the_budget_ran_out_keep_their_points(grader_cli, tmp_path: Path):
    folder = tmp_path / "slow"
    folder.mkdir()
    # A correct attention that takes a second a call: the first tests pass, the budget stops the rest.
    (folder / "attention.py").write_text(
        CORRECT.read_text()
        + "\n\nimport time as _time\n\n_correct = attention\n\n\n"
        + "def attention(*args, **kwargs):\n    _time.sleep(1)\n    return _correct(*args, **kwargs)\n"
    )
    run = grader_cli.check(folder, tmp_path / "report.json", "attention", "--timeout", "12")
    assert run.returncode == 0, run.describe()
    assert not run.report_problems(), "report breaks the contract:\n" + "\n".join(run.report_problems())
    tests = _all_tests(run)
    passed = [test for test in tests if test["outcome"] == "passed"]
    stopped = [test for test in tests if "time budget of 12 s used up" in test["message"]]
    assert passed and stopped, run.feedback("attention")
    assert all(test["points"] == test["max_points"] > 0 for test in passed), passed
    assert len(passed) + len(stopped) == len(tests), run.feedback("attention")
    assert 0 < run.report["score"] < run.report["max_score"], run.report["score"]
    assert run.report["score"] == pytest.approx(sum(test["points"] for test in passed), abs=1e-3)
    assert run.report["budget_exhausted"] is True


def test_a_correct_submission_gets_full_marks_within_the_default_budget(grade):
    run = grade(CORRECT)
    assert run.report["score"] == run.report["max_score"] > 0, run.feedback("attention")
    assert run.report["time_budget_s"] == 300 and run.report["budget_exhausted"] is False
    assert not any("time budget" in warning for warning in run.report["warnings"]), run.report["warnings"]


@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "inf"])
def test_a_bad_timeout_is_a_one_line_usage_error(grader_cli, tmp_path: Path, value: str):
    run = grader_cli.run("check", "attention", "--submission", str(STALLING), "--timeout", value, cwd=tmp_path)
    assert run.returncode == 2, run.describe()
    assert "Traceback" not in run.stdout + run.stderr, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--timeout" in lines[0], f"expected one line about --timeout:\n{run.stderr}"
