"""`reports` writes a grade in the formats people and platforms read, always atomically."""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import math
import os
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grader.grade.scoring import ExerciseResult, TestOutcome, TestResult
from grader.kit import kit_root
from grader.lang import N_, tr
from grader.text import clean

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
    seed: int | None = None  # the grading's seed (grader.host.seeds): `grader check --seed` with it regrades alike

    def __post_init__(self) -> None:
        # Messages, printed output and names come from the submission: every format written from
        # here (terminal, JSON, Gradescope, Exercism) gets them without escape sequences or surrogates.
        object.__setattr__(self, "submission", clean(self.submission, newlines=False))
        object.__setattr__(self, "warnings", tuple(clean(warning) for warning in self.warnings))
        object.__setattr__(self, "exercises", tuple(
            replace(exercise, files=tuple(clean(name, newlines=False) for name in exercise.files), tests=tuple(
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

    @property
    def percent_shown(self) -> str:
        return shown_percent(self.score, self.max_score)

    def to_json(self) -> dict[str, Any]:
        """The contract's report (section 4), plus extra keys `sandbox`, `warnings`, `time_budget_s`,
        `budget_exhausted`, `seed` (the grading's, and each test's), `blocked_by`, `diagnosed` (the catalogue's names
        of the known mistakes an exercise's failures come from), `files` (the submission's files an exercise's code was
        read from: an exercise file, or the notebooks it was made of), `absent` for an exercise not in the submission,
        and a test's `causes` (what stopped it, in words no language changes: grader.host.failures.CAUSES)."""
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
            "seed": self.seed,
            "exercises": [
                {
                    "id": exercise.id,
                    "score": exercise.score,
                    "max_score": exercise.max_score,
                    "blocked_by": list(exercise.blocked_by),
                    **({"absent": exercise.absent} if exercise.absent else {}),
                    "diagnosed": list(exercise.diagnosed),
                    "files": list(exercise.files),
                    "tests": [
                        {
                            "name": test.name,
                            "outcome": test.outcome,
                            "points": test.points,
                            "max_points": test.max_points,
                            "message": test.message,
                            "seed": test.seed,
                            **({"causes": list(test.causes)} if test.causes else {}),
                        }
                        for test in exercise.tests
                    ],
                }
                for exercise in self.exercises
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GradeReport:
        """The report that `to_json` gave (what `grader check --json` writes), read back."""
        exercises = tuple(
            ExerciseResult(
                str(exercise["id"]), float(exercise["score"]), float(exercise["max_score"]),
                tuple(TestResult(str(test["name"]), TestOutcome(test["outcome"]), float(test["points"]),
                                 float(test["max_points"]), str(test["message"]), test.get("seed"),
                                 tuple(str(cause) for cause in test.get("causes", ())))
                      for test in exercise["tests"]),
                tuple(str(name) for name in exercise.get("blocked_by", ())), str(exercise.get("absent", "")),
                tuple(str(name) for name in exercise.get("diagnosed", ())),
                files=tuple(str(name) for name in exercise.get("files", ())))
            for exercise in data["exercises"])
        budget = data.get("time_budget_s")
        return cls(str(data["submission"]), str(data["suite"]), str(data["device"]), float(data["duration_s"]),
                   str(data["torch"]), exercises, sandbox=str(data.get("sandbox", "none")),
                   warnings=tuple(str(warning) for warning in data.get("warnings", ())),
                   time_budget_s=float(budget) if budget is not None else None,
                   budget_exhausted=bool(data.get("budget_exhausted", False)),
                   seed=int(data["seed"]) if isinstance(data.get("seed"), int) else None)

    @classmethod
    def from_json_file(cls, path: Path) -> GradeReport:
        """A report file that `grader check --json` wrote."""
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


# Gradescope's visibility settings (its autograder specification, "Controlling Test Case Visibility").
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
HIDDEN_VISIBILITY = "after_published"


def to_gradescope(report: GradeReport, *, hidden_visibility: str = HIDDEN_VISIBILITY) -> dict[str, Any]:
    """Gradescope's results.json: one entry per test that counts, named uniquely; public tests are
    always visible, hidden ones as `hidden_visibility` says (Gradescope hides the total from a student
    while any test is hidden from them)."""
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"hidden tests' visibility {hidden_visibility!r} is not one of {', '.join(VISIBILITIES)}")
    tests = [
        {
            "name": name,
            "name_format": "text",
            "score": test.points,
            "max_score": test.max_points,
            "status": "passed" if test.outcome == TestOutcome.PASSED else "failed",
            "output": test.message,
            # Messages are plain text (they quote the submission's printed output): never rendered.
            "output_format": "text",
            "visibility": hidden_visibility if _suite(test.name) == "hidden" else "visible",
        }
        for exercise, test, name in _counted_tests(report)
    ]
    output = tr("{score} / {max_score} points ({suite} suite, {device}, sandbox: {sandbox})", score=f"{report.score:g}",
                max_score=f"{report.max_score:g}", suite=tr(SUITES.get(report.suite, report.suite)),
                device=report.device, sandbox=report.sandbox)
    graded = "; ".join(f"{exercise.id}: {', '.join(exercise.files)}" for exercise in report.exercises if exercise.files)
    output += "\n" + tr("Graded from: {files}", files=graded) if graded else ""
    # Below bubblewrap, the tier is the instructor's business, not the student's: the students' `output` names it
    # in its first line alone; why, and what it means, goes to Gradescope's stored `extra_data`, and the grader's
    # warnings to its own output, which `stdout_visibility` keeps for the instructor.
    extra: dict[str, Any] = {"sandbox": report.sandbox}
    if report.seed is not None:
        extra["seed"] = report.seed  # `grader check --seed` with it reproduces this grading
    if report.sandbox != "bubblewrap":
        extra["notice"] = tr(TIER_NOTICES.get(report.sandbox, TIER_NOTICES["none"]))
        extra["warnings"] = list(report.warnings)
    return {
        "score": report.score,
        "execution_time": round(report.duration_s, 3),
        "output": output,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": extra,
        "tests": tests,
    }


# The suites' names as a reader sees them (the score table's title, `grader list`, Gradescope's first line).
SUITES = {"public": N_("public"), "hidden": N_("hidden"), "all": N_("all")}


TIER_NOTICES = {  # for the instructor, in results.json's extra_data (docs/gradescope.md, section 2)
    "user": N_("graded at the user tier, without bubblewrap's namespaces: the submission ran as a separate "
               "unprivileged user, with no capability and a syscall filter; `warnings` says why"),
    "none": N_("graded WITHOUT isolation, at the none tier: the submission ran as the grader's own user; `warnings` "
               "says why"),
}


def to_exercism(report: GradeReport) -> dict[str, Any]:
    """Exercism's test-runner results.json (interface version 3: each exercise is a task), plus the
    isolation tier under the extra key `sandbox`.

    A test skipped by --quick counts as 0 and is listed as failed, so a quick run is never a `pass`;
    `error` (no test could run: every one needs a file that does not import) carries a top-level message.
    """
    from grader.curriculum import EXERCISES

    task = {exercise.id: number for number, exercise in enumerate(EXERCISES, start=1)}
    counted = list(_counted_tests(report))
    statuses = [_EXERCISM_STATUS.get(test.outcome, "error") for _, test, _ in counted]
    tests = [
        {
            "name": name,
            "status": test_status,
            "message": test.message or None,
            "test_code": _test_code(test.name),
            "task_id": task[exercise.id],
        }
        for (exercise, test, name), test_status in zip(counted, statuses, strict=True)
    ]
    if statuses and all(test_status == "pass" for test_status in statuses):
        status = "pass"
    elif statuses and all(test_status == "error" for test_status in statuses):
        status = "error"
    else:
        status = "fail"
    message = None
    if status == "error":
        message = "\n".join(dict.fromkeys(test.message for _, test, _ in counted if test.message))[:65535]
        message = message or "no test could run"
    return {"version": 3, "status": status, "message": message, "tests": tests, "sandbox": report.sandbox}


# Exercism's test statuses; any other outcome is "error".
_EXERCISM_STATUS = {TestOutcome.PASSED: "pass", TestOutcome.FAILED: "fail", TestOutcome.SKIPPED: "fail"}


def _counted_tests(report: GradeReport) -> Iterator[tuple[ExerciseResult, TestResult, str]]:
    """Each test that ran or counts (a test --quick skipped scores 0 and is shown), with a name unique in
    the report: `<exercise>: <suite>/<test>`, or its full pytest id should two tests share it."""
    chosen = [(exercise, test) for exercise in report.exercises for test in exercise.tests
              if test.outcome != TestOutcome.SKIPPED or test.max_points > 0]
    short = [f"{exercise.id}: {_short_name(test.name)}" for exercise, test in chosen]
    repeated = {name for name in short if short.count(name) > 1}
    for (exercise, test), name in zip(chosen, short, strict=True):
        yield exercise, test, f"{exercise.id}: {test.name}" if name in repeated else name


def _suite(name: str) -> str:
    """`public` or `hidden` for a test named `<suite>/test_<exercise>.py::<function>`, else ''."""
    return name.split("/", 1)[0] if "::" in name and "/" in name.split("::", 1)[0] else ""


def _short_name(name: str) -> str:
    suite = _suite(name)
    return f"{suite}/{name.split('::')[-1]}" if suite else name.split("::")[-1]


def _test_code(name: str) -> str:
    """Exercism's `test_code`: a public test's function body; a hidden test's code is never shown."""
    suite = _suite(name)
    if suite == "hidden":
        return "# a hidden test: its code is not shown"
    body = _function_bodies(name.split("::", 1)[0]).get(name.split("::")[-1].split("[")[0]) if suite else None
    return body or f"# {name}: its code is not available here"


@functools.cache
def _function_bodies(relative: str) -> dict[str, str]:
    """The body of each test function in `tests/<relative>`, dedented; empty where the file cannot be read."""
    try:
        source = (kit_root() / "tests" / relative).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return {}
    lines = source.splitlines()
    bodies = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
                first = node.body[1]  # the docstring says what the test checks; the code is what follows
            text = "\n".join(lines[first.lineno - 1:node.end_lineno])
            bodies[node.name] = textwrap.dedent(text).strip()
    return bodies


def write_json(data: dict[str, Any], path: Path, *, make_folder: bool = True) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one; `make_folder=False` writes only
    into a folder that still exists (FileNotFoundError otherwise)."""
    with (atomic_path(path, ".tmp", make_folder=make_folder) as temporary,
          open(temporary, "w", encoding="utf-8") as handle):
        json.dump(data, handle, indent=2, allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str, *, make_folder: bool = True) -> Iterator[Path]:
    """A fresh temporary path beside `path` to write to; once the block ends, it replaces `path`.

    Readers see the old file or the new one, never half of one; the new file gets the permissions
    of any file made here (mkstemp's 0600 would hide it from other users); on error nothing changes.
    The folder is made where missing, unless `make_folder` is False.
    """
    path = Path(path)
    if make_folder:
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


def shown_percent(earned: float, total: float) -> str:
    """`earned` of `total` as a percentage a reader cannot misread: 100 only for full marks, 0 only for none, whole
    numbers rounded down but near either end, where one decimal keeps them off it (99.74 of 100 is "99.7", not "100"
    beside a failing test; 0.04 is "0.1")."""
    percent = 100.0 * earned / total if total else 0.0
    if percent >= 100.0 or percent <= 0.0:
        return f"{min(max(percent, 0.0), 100.0):.0f}"
    if percent > 99.0:
        return f"{min(math.floor(percent * 10) / 10, 99.9):.1f}"
    if percent < 1.0:
        return f"{max(math.ceil(percent * 10) / 10, 0.1):.1f}"
    return f"{math.floor(percent)}"
