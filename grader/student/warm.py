"""`warm` grades for `grader watch` in one process kept warm for the whole session, a fresh child per check.

The process is a `grader batch` slot (`grader.batch.slot`): it imported torch and the reference once,
collected the exercise's suites once and keeps a sandbox and its zygote up. Each check forks a child
from it with a fresh worker, so isolation, report, score and messages are those of a cold
`grader check` (the same budget, the same quick mode), at a fraction of its start-up. A submission
that breaks the slot (kills its zygote, hangs past the budget) costs that check only: the slot
replaces its sandbox, or is replaced, and the next save starts clean. Each failure is fed back as it
happens, so the first one can be shown before the exercise has finished.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader import lang
from grader.batch.jobs import Isolation, Job, Status
from grader.batch.slot_process import Slot
from grader.grade.reports import GradeReport
from grader.grade.selection import select
from grader.host import tiers
from grader.host.limits import Limits
from grader.host.scratch import remove_stale_stages
from grader.lang import tr

BUDGET_S = 300.0  # as `grader check --timeout`'s default
SLOT_MARGIN_S = 60.0  # past the budget, the slot's child is killed; past this too, the slot itself is replaced


@dataclass(frozen=True)
class Checked:
    """One check's end: the report, or (refused, timed out, the grader broke) why there is none."""

    report: GradeReport | None
    problem: str = ""
    refused: bool = False  # the submission could not be read: the student's to fix, like exit 2
    cancelled: bool = False  # stopped for a newer save: nothing to show


@dataclass(frozen=True)
class FirstFailure:
    test: str
    message: str


class WarmChecker:
    """`check(submission, exercise)` as `grader check EXERCISE --submission SUBMISSION [--quick]` would grade it."""

    def __init__(self, *, device: str = "auto", suite: str | None = None, quick: bool = True,
                 budget_s: float = BUDGET_S) -> None:
        self._suite = suite
        self._quick = quick
        self._budget_s = budget_s
        self._limits = Limits.from_environment()  # read here, at watch's edge; each job carries them to the slot
        remove_stale_stages()
        self._stage = Path(tempfile.mkdtemp(prefix=f"grader-watch-{os.getpid()}-"))
        self._stage.chmod(0o711)  # crossed, never listed, by bubblewrap running as uid 65534
        self._work = Path(tempfile.mkdtemp(prefix="grader-watch-reports-"))
        self._slot = Slot(device, self._stage)  # starts warming up now, while the student reads

    def check(self, submission: Path, exercises: Sequence[str], *,
              on_first_failure: Callable[[FirstFailure], None] | None = None,
              cancel_if: Callable[[], bool] | None = None) -> Checked:
        """`grader check EXERCISES... --submission SUBMISSION`, in a child of the warm slot; stopped (its child and
        worker killed, as at the time budget) as soon as `cancel_if()`, asked every 50 ms, says so."""
        selection = select(list(exercises), self._suite)
        report, failures = self._work / "report.json", self._work / "failures.jsonl"
        for stale in (report, failures):
            stale.unlink(missing_ok=True)
        isolation = Isolation(protect=tiers.exposure(selection.suite) or "", sandbox=tiers.requested())
        job = Job(str(submission.resolve()), str(report), list(selection.exercises), selection.suite,
                  self._budget_s + SLOT_MARGIN_S / 2, isolation, quick=self._quick, budget_s=self._budget_s,
                  failures=str(failures), language=lang.current(), limits=self._limits.to_json())
        shown: list[FirstFailure] = []

        def first_failure() -> None:
            if on_first_failure is None or shown:
                return
            try:
                line = failures.read_text(encoding="utf-8").partition("\n")[0]
                found = json.loads(line) if line else None
            except (OSError, ValueError):
                return
            if isinstance(found, dict):
                shown.append(FirstFailure(str(found.get("test", "")), str(found.get("message", ""))))
                on_first_failure(shown[0])

        def waiting() -> bool:
            first_failure()
            return cancel_if is not None and cancel_if()

        outcome = self._slot.grade(job, timeout_s=self._budget_s + SLOT_MARGIN_S, on_wait=waiting)
        if outcome.status == Status.CANCELLED:
            return Checked(None, cancelled=True)
        if outcome.status == Status.GRADED and report.is_file():
            return Checked(GradeReport.from_json_file(report))
        if outcome.status == Status.REFUSED:
            return Checked(None, outcome.reason, refused=True)
        if outcome.status == Status.TIMEOUT:
            return Checked(None, tr("{reason}: the check was stopped", reason=outcome.reason))
        return Checked(None, outcome.reason or tr("the grading process stopped"))

    def close(self) -> None:
        self._slot.close()
        shutil.rmtree(self._stage, ignore_errors=True)
        shutil.rmtree(self._work, ignore_errors=True)
