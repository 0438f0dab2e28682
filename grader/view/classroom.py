"""`classroom` gives a GitHub Actions job what the release's workflow (grader/recipes/grade.yml) reports: the score
table for the job summary and the points for GitHub Classroom, from the grader's JSON report, in the course's language.

`python -m grader.view.classroom REPORT` appends the table to `$GITHUB_STEP_SUMMARY` and, where the submission was
graded in a sandbox, writes Classroom's `result` to `$GITHUB_OUTPUT`: the format its reporter
(classroom-resources/autograding-grading-reporter) reads, base64-encoded JSON with one test per exercise. Points
graded without isolation are never reported. A missing or unreadable report is said in the summary, and nothing is
reported.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from grader import lang
from grader.grade.reports import SUITES
from grader.lang import tr


def read(path: Path) -> dict[str, Any] | None:
    """The report at `path`, or None where there is none to read."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        return report if isinstance(report, dict) and isinstance(report.get("exercises"), list) else None
    except (OSError, ValueError):
        return None


def summary(report: dict[str, Any] | None) -> str:
    """The job summary's Markdown: the score, a row per exercise, the suite and the sandbox."""
    if report is None:
        return tr("No score: the grading wrote no report; see the Grade step's log.") + "\n"
    score, maximum = f"{report['score']:g}", f"{report['max_score']:g}"
    lines = [f"### {tr('{score} / {maximum} points', score=score, maximum=maximum)}\n",
             "| {} | {} | {} | {} |".format(tr("exercise"), tr("points"), tr("tests passed"), tr("blocked by")),
             "|:--|--:|--:|:--|"]
    for exercise in report["exercises"]:
        passed = sum(test["outcome"] == "passed" for test in exercise["tests"])
        lines.append(f"| {exercise['id']} | {exercise['score']:g} / {exercise['max_score']:g} | {passed} / "
                     f"{len(exercise['tests'])} | {', '.join(exercise.get('blocked_by', []))} |")
    lines.append(f"| **{tr('total')}** | **{score} / {maximum}** | | |\n")
    lines.append(tr("{suite} suite, sandbox: {sandbox}, torch {torch}; the full report is the grader-report artifact.",
                    suite=tr(SUITES.get(report["suite"], report["suite"])), sandbox=_sandbox(report),
                    torch=report["torch"]))
    if _sandbox(report) in ("none", "missing"):
        lines.append("\n**" + tr("Graded without isolation: this score cannot be trusted, and GitHub Classroom was "
                                 "not given it.") + "**")
    return "\n".join(lines) + "\n"


def result(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """GitHub Classroom's results: one test per exercise with its points; None where nothing may be reported. The
    status is "pass" whatever the score: the job's colour stays the Grade step's (--fail-under), as the reporter fails
    the job on "fail"."""
    if report is None or _sandbox(report) in ("none", "missing"):
        return None
    tests = [{"name": exercise["id"], "status": "pass" if exercise["score"] >= exercise["max_score"] else "fail",
              "score": exercise["score"],
              "message": tr("{score} / {maximum} points", score=f"{exercise['score']:g}",
                            maximum=f"{exercise['max_score']:g}"),
              "test_code": f"grader check {exercise['id']}", "filename": ", ".join(exercise.get("files", [])),
              "line_no": 0, "duration": 0} for exercise in report["exercises"]]
    return {"version": 1, "status": "pass", "max_score": report["max_score"], "tests": tests}


def _sandbox(report: dict[str, Any]) -> str:
    return report.get("sandbox") or "missing"


def main(argv: list[str]) -> int:
    lang.use(lang.choose())
    report = read(Path(argv[0])) if argv else None
    with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as file:
        file.write(summary(report))
    found = result(report)
    if found is not None:
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as file:
            file.write("result=" + base64.b64encode(json.dumps(found).encode()).decode() + "\n")
        print(tr("GitHub Classroom gets {score} / {maximum} points", score=f"{report['score']:g}",
                 maximum=f"{report['max_score']:g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
