"""`summary` turns a batch's results into DIR/grades.csv and the class statistics of DIR/summary.json."""

from __future__ import annotations

import contextlib
import csv
import io
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.batch.failing import LIMITS, HardTest, excerpt, first_line, hardest_tests, most_common
from grader.batch.jobs import ReportJSON, Result, Status
from grader.curriculum import BY_ID
from grader.grade.reports import GradeReport, atomic_path, write_json
from grader.grade.results import ExerciseResult, ExerciseStatus, TestOutcome
from grader.grade.selection import Selection
from grader.text import spreadsheet_cell

# How the worker's limits announce themselves in a test's message (see grader/host/workers.py and failures.py).
# A result's status as grades.csv and summary.json name it (docs/contract.md#gradescsv), so that a 0 is never silent.
CSV_STATUS = {Status.GRADED: "graded", Status.REFUSED: "refused", Status.TIMEOUT: "limit",
              Status.FAILED: "grader-error"}
# The statuses the class's mean, mean per exercise and histogram count: the graded only. A refused one had
# nothing to grade, a grader-error one is the kit's failure, and a `limit` one went over the batch's --timeout
# before its tests ran: their 0s say nothing of what the class can do. In grades.csv a `limit` row keeps its 0s
# (the submission ran out of time); a refused or grader-error one leaves its point cells empty, so that a total
# column uploaded to a gradebook never turns a broken zip or the kit's own failure into a silent 0.
SCORED = (Status.GRADED,)
UNPOINTED = (Status.REFUSED, Status.FAILED)
# How summary.json's `limits` names a submission that was not simply graded.
LIMIT_KIND = {Status.REFUSED: "refused", Status.TIMEOUT: "timeout", Status.FAILED: "grader-error"}


@dataclass(frozen=True)
class ScoreBin:
    """One bar of the score histogram: how many submissions scored from `from_percent` up to `to_percent`."""

    from_percent: int
    to_percent: int
    count: int


@dataclass(frozen=True)
class ClassMistake:
    """A known mistake of the catalogue that the diagnosis found in some submissions: who, and what it is."""

    exercise: str
    name: str
    count: int
    ids: list[str]
    explanation: str  # the catalogue's diagnosis text; "" where no catalogue is installed


@dataclass(frozen=True)
class ImportFailure:
    """An exercise file that did not import (a syntax error, a missing name) in some graded submissions: every test
    of that exercise stopped there, so none of them says anything else about it."""

    exercise: str
    count: int
    ids: list[str]
    example: str  # the first line most of these failures share
    example_from: str  # the first submission, in id order, that failed with it


@dataclass(frozen=True)
class LimitHit:
    """A submission that was not graded, or was graded but hit a limit (timeout, crash, memory) in some tests: its
    status as grades.csv says it, the limits, and the first reason given (the report's warning, or the first test a
    limit stopped, as `exercise: message`)."""

    id: str
    limits: list[str]
    reason: str
    status: str


@dataclass(frozen=True)
class ClassSummary:
    """Class statistics over the scored submissions (see SCORED), with the others counted beside them.

    Nothing in it depends on when or how often the batch ran: a rerun that skips what is done writes the
    same summary.json as an uninterrupted run.
    """

    submissions: int
    statuses: dict[str, int]  # every status as grades.csv names it, 0 included, so that none is silent
    scored: int  # the submissions the mean, mean per exercise and histogram are over
    sandboxes: dict[str, int]
    max_score: float
    mean_score: float | None  # None when no submission was scored: not a class mean of 0
    exercises: dict[str, float | None]  # mean score per exercise, in curriculum order
    histogram: list[ScoreBin]
    hardest_tests: list[HardTest]  # over the graded submissions' tests: the others ran none
    limits: list[LimitHit]
    mistakes: list[ClassMistake]  # the diagnosed known mistakes, the most frequent first
    did_not_import: list[ImportFailure]  # exercise files that did not import, the most frequent first

    def to_json(self) -> dict[str, object]:
        """summary.json's content: the fields in order, each as its JSON key."""
        return asdict(self)

    def write(self, path: Path) -> None:
        write_json(self.to_json(), path)


def write_grades_csv(results: list[Result], selection: Selection, path: Path) -> None:
    """One row per submission: id, status, sandbox tier, one column per exercise, total, and the diagnosed mistakes
    (`exercise/name`, `;`-separated). Written atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "status", "sandbox", *selection.exercises, "total", "mistakes"])
    for result in results:
        scores = {e["id"]: e["score"] for e in result.report.get("exercises", [])}
        text = [result.id, CSV_STATUS[result.ended], result.report.get("sandbox") or ""]
        points = ["" for _ in (*selection.exercises, "total")] if result.ended in UNPOINTED else [
            *(f"{scores.get(x, 0.0):g}" for x in selection.exercises), f"{result.report.get('score', 0.0):g}"]
        writer.writerow([*(spreadsheet_cell(cell) for cell in text), *points,
                         spreadsheet_cell("; ".join(f"{x}/{name}" for x, name in diagnosed(result.report)))])
    with atomic_path(path, ".tmp") as temporary:
        temporary.write_text(buffer.getvalue(), encoding="utf-8")


def summarise(results: list[Result], selection: Selection) -> ClassSummary:
    """Class statistics over the scored submissions, the refused and grader-error ones counted apart."""
    maximum = sum(float(BY_ID[x].points) for x in selection.exercises)
    scored = [r.report for r in results if r.ended in SCORED]
    # Each graded report read once, for the two statistics over the exercises that judged the student's own code.
    judged = [(r.id, _judged_exercises(r.report)) for r in results if r.ended == Status.GRADED]
    return ClassSummary(
        submissions=len(results),
        statuses={name: sum(CSV_STATUS[r.ended] == name for r in results) for name in CSV_STATUS.values()},
        scored=len(scored),
        sandboxes=dict(Counter(r.report.get("sandbox") or "not graded" for r in results)),
        max_score=maximum,
        mean_score=_mean([r.get("score", 0.0) for r in scored]),
        exercises={x: _mean([_exercise_score(r, x) for r in scored]) for x in selection.exercises},
        histogram=_histogram([r.get("score", 0.0) for r in scored], maximum),
        hardest_tests=hardest_tests(judged),
        limits=[hit for r in results if (hit := _limit_hit(r))],
        mistakes=_class_mistakes(results),
        did_not_import=_import_failures(judged),
    )


def did_not_import(exercise: ExerciseResult) -> str:
    """The first line of the failure where every test of `exercise` that ran stopped at importing a file; "" where
    any got further (or none ran)."""
    ran = [test for test in exercise.tests if test.outcome != TestOutcome.SKIPPED and test.max_points > 0]
    if not ran or any(test.outcome != TestOutcome.ERROR for test in ran):
        return ""
    return first_line(ran[0].message)


def judges_own_code(exercise: ExerciseResult) -> bool:
    """Whether `exercise`'s tests judged the student's own code: not blocked by a failing prerequisite, not an
    unstarted stub, and in the submission."""
    return not exercise.blocked_by and exercise.status not in (ExerciseStatus.NOT_STARTED,
                                                                ExerciseStatus.NOT_SUBMITTED)


def _import_failures(judged: list[tuple[str, list[ExerciseResult]]]) -> list[ImportFailure]:
    who: dict[str, list[str]] = {}
    examples: dict[str, dict[str, list[str]]] = {}
    for submission_id, exercises in judged:
        for exercise in exercises:
            if line := did_not_import(exercise):
                who.setdefault(exercise.id, []).append(submission_id)
                examples.setdefault(exercise.id, {}).setdefault(excerpt(line), []).append(submission_id)
    ranked = sorted(who, key=lambda x: -len(who[x]))  # stable: curriculum order among equals
    return [ImportFailure(x, len(who[x]), who[x], *most_common(examples[x])) for x in ranked]


def diagnosed(report: ReportJSON) -> list[tuple[str, str]]:
    """(exercise, mistake name) for each known mistake the diagnosis found in this report, in curriculum order."""
    return [(str(e.get("id", "")), str(name)) for e in report.get("exercises", []) for name in e.get("diagnosed") or ()]


def explanation(exercise: str, name: str) -> str:
    """What the catalogue says the mistake is; "" where it is not installed (the student release) or lacks it."""
    from grader.judge import variants

    with contextlib.suppress(Exception):
        return next((v.diagnosis or "" for v in variants.mistakes(exercise) if v.name == name), "")
    return ""


def _class_mistakes(results: list[Result]) -> list[ClassMistake]:
    """The diagnosed mistakes over the graded submissions, the most frequent first (then curriculum order)."""
    who: dict[tuple[str, str], list[str]] = {}
    for result in results:
        if result.ended == Status.GRADED:
            for found in diagnosed(result.report):
                who.setdefault(found, []).append(result.id)
    ranked = sorted(who, key=lambda found: -len(who[found]))  # stable: curriculum order among equals
    return [ClassMistake(x, name, len(who[(x, name)]), who[(x, name)], explanation(x, name)) for x, name in ranked]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _histogram(scores: list[float], maximum: float) -> list[ScoreBin]:
    """Ten bars of 10 percent each; full marks fall in the last."""
    bins = Counter(min(int((100 * score / maximum if maximum else 0.0) // 10), 9) for score in scores)
    return [ScoreBin(10 * i, 10 * i + 10, bins.get(i, 0)) for i in range(10)]


def _judged_exercises(report: ReportJSON) -> list[ExerciseResult]:
    """The exercises of a graded report whose tests judged their own code (see `failing.hardest_tests`)."""
    try:
        exercises = GradeReport.from_json(dict(report)).exercises
    except (KeyError, TypeError, ValueError):
        return []
    return [exercise for exercise in exercises if judges_own_code(exercise)]


def _limit_hit(result: Result) -> LimitHit | None:
    """Why a submission is not simply graded: its status, or the limits its tests hit; None when neither."""
    hits, first = set(), ""
    if result.ended == Status.GRADED:
        for exercise in result.report.get("exercises", []):
            for test in exercise.get("tests", []):
                limits = {str(cause) for cause in test.get("causes") or () if cause in LIMITS}
                if limits and not first:
                    first = excerpt(f"{exercise.get('id')}: {test.get('message', '')}".split("\n")[0])
                hits |= limits
        return LimitHit(result.id, sorted(hits), first, CSV_STATUS[result.ended]) if hits else None
    reason = (result.report.get("warnings") or [""])[0]
    return LimitHit(result.id, [LIMIT_KIND[result.ended]], reason, CSV_STATUS[result.ended])


def _exercise_score(report: ReportJSON, exercise_id: str) -> float:
    return next((e["score"] for e in report.get("exercises", []) if e.get("id") == exercise_id), 0.0)
