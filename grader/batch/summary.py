"""`summary` turns a batch's results into DIR/grades.csv and the class statistics of DIR/summary.json."""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.batch.jobs import ReportJSON, Status
from grader.curriculum import BY_ID
from grader.grade.reports import atomic_path, write_json
from grader.grade.selection import Selection
from grader.text import spreadsheet_cell

if TYPE_CHECKING:
    from grader.batch.schedule import Result

# How the worker's limits announce themselves in a test's message (see grader/host/workers.py and failures.py).
LIMIT_SIGNS = {"timed out after": "timeout", "crashed with": "crash", "the worker exited with": "crash",
               "ran out of memory": "memory"}
# A result's status as grades.csv names it (CONTRACT.md section 4), so that a 0 is never silent.
CSV_STATUS = {Status.GRADED: "graded", Status.REFUSED: "refused", Status.TIMEOUT: "limit",
              Status.FAILED: "grader-error"}


@dataclass(frozen=True)
class ScoreBin:
    """One bar of the score histogram: how many submissions scored from `from_percent` up to `to_percent`."""

    from_percent: int
    to_percent: int
    count: int


@dataclass(frozen=True)
class HardTest:
    """A test that some submissions fail, with the share that pass it."""

    name: str
    pass_rate: float
    failed: int


@dataclass(frozen=True)
class LimitHit:
    """A submission that was not graded or hit a limit (timeout, crash, memory), and the first reason given."""

    id: str
    limits: list[str]
    reason: str


@dataclass(frozen=True)
class ClassSummary:
    """Class statistics: score histogram, mean per exercise, hardest tests, and limit hits."""

    submissions: int
    statuses: dict[str, int]
    sandboxes: dict[str, int]
    max_score: float
    mean_score: float
    exercises: dict[str, float]  # mean score per exercise, in curriculum order
    histogram: list[ScoreBin]
    hardest_tests: list[HardTest]
    limits: list[LimitHit]

    def to_json(self) -> dict[str, object]:
        """summary.json's content: the fields in order, each as its JSON key."""
        return asdict(self)

    def write(self, path: Path) -> None:
        write_json(self.to_json(), path)


def write_grades_csv(results: list[Result], selection: Selection, path: Path) -> None:
    """One row per submission: id, status, sandbox tier, one column per exercise, total. Written atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "status", "sandbox", *selection.exercises, "total"])
    for result in results:
        scores = {e["id"]: e["score"] for e in result.report.get("exercises", [])}
        # A submission skipped as done keeps the status it was graded with.
        status = result.report.get("status", "graded") if result.status == Status.SKIPPED else result.status
        text = [result.id, CSV_STATUS.get(status, status), result.report.get("sandbox") or ""]
        writer.writerow([*(spreadsheet_cell(cell) for cell in text),
                         *(f"{scores.get(x, 0.0):g}" for x in selection.exercises),
                         f"{result.report.get('score', 0.0):g}"])
    with atomic_path(path, ".tmp") as temporary:
        temporary.write_text(buffer.getvalue(), encoding="utf-8")


def summarise(results: list[Result], selection: Selection) -> ClassSummary:
    """Class statistics: score histogram, mean per exercise, hardest tests, and limit hits."""
    reports = [r.report for r in results]
    maximum = sum(float(BY_ID[x].points) for x in selection.exercises)
    percents = [100 * r.get("score", 0.0) / maximum if maximum else 0.0 for r in reports]
    histogram = Counter(min(int(p // 10), 9) for p in percents)
    passed: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    limits = []
    for result in results:
        hits = set()
        for exercise in result.report.get("exercises", []) if result.status in (Status.GRADED, Status.SKIPPED) else []:
            for test in exercise.get("tests", []):
                if test.get("outcome") == "skipped":
                    continue
                seen[test["name"]] += 1
                passed[test["name"]] += test.get("outcome") == "passed"
                hits |= {kind for sign, kind in LIMIT_SIGNS.items() if sign in test.get("message", "")}
        reason = ""
        if result.status in (Status.TIMEOUT, Status.REFUSED, Status.FAILED):
            hits.add(str(result.status))
            reason = (result.report.get("warnings") or [""])[0]
        if hits:
            limits.append(LimitHit(result.id, sorted(hits), reason))
    hardest = sorted(seen, key=lambda name: (passed[name] / seen[name], name))[:10]
    return ClassSummary(
        submissions=len(results),
        statuses=dict(Counter(str(r.status) for r in results)),
        sandboxes=dict(Counter(r.report.get("sandbox") or "not graded" for r in results)),
        max_score=maximum,
        mean_score=round(sum(r.get("score", 0.0) for r in reports) / len(reports), 4) if reports else 0.0,
        exercises={x: round(sum(_exercise_score(r, x) for r in reports) / len(reports), 4) if reports else 0.0
                   for x in selection.exercises},
        histogram=[ScoreBin(10 * i, 10 * i + 10, histogram.get(i, 0)) for i in range(10)],
        hardest_tests=[HardTest(n, round(passed[n] / seen[n], 4), seen[n] - passed[n])
                       for n in hardest if passed[n] < seen[n]],
        limits=limits,
    )


def _exercise_score(report: ReportJSON, exercise_id: str) -> float:
    return next((e["score"] for e in report.get("exercises", []) if e.get("id") == exercise_id), 0.0)
