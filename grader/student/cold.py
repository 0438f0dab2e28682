"""`cold` grades for `grader watch` where no warm process can be kept: each check is a `grader check` of its own.

The warm checker (`warm`) forks each check from a process that imported torch once: Linux only. Where
workers are spawned (Windows, macOS, GRADER_WORKERS=spawn, see `grader.host.portable`), a save runs
`python -m grader check EXERCISES --submission SUBMISSION --json REPORT` instead: the same report, score
and messages, a second or two slower to start. Its first failure comes with the table, not before it. A newer
save stops it with SIGTERM, which `grader check` takes as Ctrl-C: it kills its workers' trees on the way out.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from grader.grade.reports import GradeReport
from grader.lang import tr
from grader.student.jupyter import EXIT_USAGE, child_environment, error_line
from grader.student.warm import BUDGET_S, SLOT_MARGIN_S, Checked, FirstFailure

POLL_S = 0.05  # how often a running check looks for a newer save
STOP_S = 10.0  # SIGTERM unwinds `grader check` like Ctrl-C, killing its workers; past this, it is killed


class ColdChecker:
    """`check(submission, exercises)` as WarmChecker's, each in a `grader check` process of its own."""

    def __init__(self, *, quick: bool = True, budget_s: float = BUDGET_S) -> None:
        self._quick = quick
        self._budget_s = budget_s
        self._work = tempfile.TemporaryDirectory(prefix="grader-watch-reports-")

    def check(self, submission: Path, exercises: Sequence[str], *,
              on_first_failure: Callable[[FirstFailure], None] | None = None,
              cancel_if: Callable[[], bool] | None = None) -> Checked:
        report = Path(self._work.name) / "report.json"
        report.unlink(missing_ok=True)
        command = [sys.executable, "-m", "grader", "check", *exercises, "--submission", str(submission),
                   "--json", str(report), "--timeout", f"{self._budget_s:g}", *(["--quick"] if self._quick else [])]
        # this very grader, as %grader runs it
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, env=child_environment(), encoding="utf-8",
                                   errors="replace")
        deadline = time.monotonic() + self._budget_s + SLOT_MARGIN_S
        while True:
            try:
                _, stderr = process.communicate(timeout=POLL_S)  # retried, it loses no output
                break
            except subprocess.TimeoutExpired:
                if cancel_if is not None and cancel_if():
                    _stop(process)
                    return Checked(None, cancelled=True)
                if time.monotonic() > deadline:
                    _stop(process)
                    return Checked(None, tr("the check took over {seconds} s: the check was stopped",
                                            seconds=f"{self._budget_s + SLOT_MARGIN_S:g}"))
        said = error_line(stderr)
        if process.returncode == EXIT_USAGE:
            return Checked(None, said or tr("grader check stopped with exit code {code}", code=process.returncode),
                           refused=True)
        if not report.is_file():
            return Checked(None, said or tr("grader check stopped with exit code {code}", code=process.returncode))
        return Checked(GradeReport.from_json_file(report))

    def close(self) -> None:
        self._work.cleanup()


def _stop(process: subprocess.Popen[str]) -> None:
    """End a `grader check` as a cancelled CI job ends it: it unwinds and kills its workers' trees on the way out."""
    process.terminate()
    try:
        process.communicate(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
