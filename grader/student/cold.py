"""`cold` grades for `grader watch` where no warm process can be kept: each check is a `grader check` of its own.

The warm checker (`warm`) forks each check from a process that imported torch once: Linux only. Where
workers are spawned (Windows, macOS, GRADER_WORKERS=spawn, see `grader.host.portable`), a save runs
`python -m grader check EXERCISES --submission SUBMISSION --json REPORT` instead: the same report, score
and messages, a second or two slower to start. Its first failure comes with the table, not before it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from grader.grade.reports import GradeReport
from grader.lang import tr
from grader.student.jupyter import EXIT_USAGE, child_environment, error_line
from grader.student.warm import BUDGET_S, SLOT_MARGIN_S, Checked, FirstFailure


class ColdChecker:
    """`check(submission, exercises)` as WarmChecker's, each in a `grader check` process of its own."""

    def __init__(self, *, quick: bool = True, budget_s: float = BUDGET_S) -> None:
        self._quick = quick
        self._budget_s = budget_s
        self._work = tempfile.TemporaryDirectory(prefix="grader-watch-reports-")

    def check(self, submission: Path, exercises: Sequence[str], *,
              on_first_failure: Callable[[FirstFailure], None] | None = None) -> Checked:
        report = Path(self._work.name) / "report.json"
        report.unlink(missing_ok=True)
        command = [sys.executable, "-m", "grader", "check", *exercises, "--submission", str(submission),
                   "--json", str(report), "--timeout", f"{self._budget_s:g}", *(["--quick"] if self._quick else [])]
        try:  # this very grader, as %grader runs it
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=child_environment(),
                                  timeout=self._budget_s + SLOT_MARGIN_S, encoding="utf-8", errors="replace")
        except subprocess.TimeoutExpired:
            return Checked(None, tr("the check took over {seconds} s: the check was stopped",
                                    seconds=f"{self._budget_s + SLOT_MARGIN_S:g}"))
        said = error_line(done.stderr)
        if done.returncode == EXIT_USAGE:
            return Checked(None, said or tr("grader check stopped with exit code {code}", code=done.returncode),
                           refused=True)
        if not report.is_file():
            return Checked(None, said or tr("grader check stopped with exit code {code}", code=done.returncode))
        return Checked(GradeReport.from_json_file(report))

    def close(self) -> None:
        self._work.cleanup()
