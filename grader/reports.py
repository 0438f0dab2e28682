"""`reports` writes a grade in the formats people and platforms read, always atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .scoring import ExerciseResult
from .text import clean

SCHEMA = "grader-report/1"


@dataclass(frozen=True)
class GradeReport:
    submission: str
    suite: str
    device: str
    duration_s: float
    torch: str
    exercises: tuple[ExerciseResult, ...]
    sandbox: str = "none"
    warnings: tuple[str, ...] = field(default=())
    time_budget_s: float | None = None  # `grader check --timeout`; None where the caller bounds the run itself
    budget_exhausted: bool = False  # the budget ran out before every test had run to its end

    def __post_init__(self) -> None:
        # Messages, printed output and names come from the submission: every format written from
        # here (terminal, JSON, Gradescope, Exercism) gets them without escape sequences or surrogates.
        object.__setattr__(self, "submission", clean(self.submission, newlines=False))
        object.__setattr__(self, "warnings", tuple(clean(warning) for warning in self.warnings))
        object.__setattr__(self, "exercises", tuple(
            replace(exercise, tests=tuple(
                replace(test, name=clean(test.name, newlines=False), message=clean(test.message))
                for test in exercise.tests))
            for exercise in self.exercises))

    @property
    def score(self) -> float:
        return round(sum(exercise.score for exercise in self.exercises), 4)

    @property
    def max_score(self) -> float:
        return round(sum(exercise.max_score for exercise in self.exercises), 4)

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0

    def to_json(self) -> dict[str, Any]:
        """The contract's report (section 4), plus extra keys `sandbox`, `warnings`, `time_budget_s`,
        `budget_exhausted`, `blocked_by`, `seed`."""
        return {
            "schema": SCHEMA,
            "submission": self.submission,
            "suite": self.suite,
            "device": self.device,
            "score": self.score,
            "max_score": self.max_score,
            "duration_s": round(self.duration_s, 3),
            "torch": self.torch,
            "sandbox": self.sandbox,
            "warnings": list(self.warnings),
            "time_budget_s": self.time_budget_s,
            "budget_exhausted": self.budget_exhausted,
            "exercises": [
                {
                    "id": exercise.id,
                    "score": exercise.score,
                    "max_score": exercise.max_score,
                    "blocked_by": list(exercise.blocked_by),
                    "tests": [
                        {
                            "name": test.name,
                            "outcome": test.outcome,
                            "points": test.points,
                            "max_points": test.max_points,
                            "message": test.message,
                            "seed": test.seed,
                        }
                        for test in exercise.tests
                    ],
                }
                for exercise in self.exercises
            ],
        }


def to_gradescope(report: GradeReport) -> dict[str, Any]:
    """Gradescope's results.json: one entry per test; hidden tests are shown after publishing."""
    tests = []
    for exercise in report.exercises:
        for test in exercise.tests:
            if test.outcome == "skipped":
                continue
            hidden = test.name.startswith("hidden/")
            tests.append({
                "name": f"{exercise.id}: {test.name.split('::')[-1]}",
                "score": test.points,
                "max_score": test.max_points,
                "status": "passed" if test.outcome == "passed" else "failed",
                "output": test.message,
                "visibility": "after_published" if hidden else "visible",
            })
    output = f"{report.score:g} / {report.max_score:g} points ({report.suite} suite, {report.device}, sandbox: " \
             f"{report.sandbox})"
    if report.sandbox != "bubblewrap":
        warning = TIER_WARNINGS.get(report.sandbox, TIER_WARNINGS["none"])
        output += f"\n\nWARNING: {warning} (sandbox: {report.sandbox})."
    return {
        "score": report.score,
        "execution_time": round(report.duration_s, 3),
        "output": output,
        "visibility": "visible",
        "tests": tests,
    }


TIER_WARNINGS = {
    "user": "this submission was graded without bubblewrap's namespaces, as a separate unprivileged user",
    "none": "this submission was graded WITHOUT isolation: it ran as the grader's own user",
}


def to_exercism(report: GradeReport) -> dict[str, Any]:
    """Exercism's test-runner results.json (interface version 3: each exercise is a task), plus the
    isolation tier under the extra key `sandbox`."""
    from .curriculum import EXERCISES

    task = {exercise.id: number for number, exercise in enumerate(EXERCISES, start=1)}
    tests = [
        {
            "name": f"{exercise.id}: {test.name.split('::')[-1]}",
            "status": {"passed": "pass", "failed": "fail"}.get(test.outcome, "error"),
            "message": test.message or None,
            "task_id": task[exercise.id],
        }
        for exercise in report.exercises
        for test in exercise.tests
        if test.outcome != "skipped"
    ]
    if tests and all(test["status"] == "pass" for test in tests):
        status = "pass"
    elif tests and all(test["status"] == "error" for test in tests):
        status = "error"
    else:
        status = "fail"
    message = "; ".join(sorted({t["message"] for t in tests if t["message"]}))[:65535] if status == "error" else None
    return {"version": 3, "status": status, "message": message, "tests": tests, "sandbox": report.sandbox}


def write_json(data: dict[str, Any], path: Path) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one."""
    with atomic_path(path, ".tmp") as temporary, open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str) -> Iterator[Path]:
    """A fresh temporary path beside `path` to write to; once the block ends, it replaces `path`.

    Readers see the old file or the new one, never half of one; the new file gets the permissions
    of any file made here (mkstemp's 0600 would hide it from other users); on error nothing changes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(temporary)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
