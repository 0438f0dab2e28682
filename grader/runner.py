"""`runner` grades one submission: pytest over the selected suites, in this trusted process.

Flow: submission → staged copy → worker (sandbox) ← trusted tests (pytest) → outcomes → scores.
The worker is started before pytest so that its torch import overlaps with ours.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from pytest_jsonreport.plugin import JSONReport

from . import scoring
from .curriculum import BY_ID, EXERCISES
from .plugin import PreparedSession
from .reports import GradeReport
from .sandbox import Limits, bwrap_problem
from .session import GradingSession, kit_root

SUITES = ("public", "hidden", "all")


class UsageError(ValueError):
    """The user asked for something we cannot do; the message says what to do instead."""


@dataclass(frozen=True)
class Selection:
    exercises: tuple[str, ...]
    suite: str
    files: tuple[Path, ...]


def hidden_installed(root: Path | None = None) -> bool:
    return any((root or kit_root()).joinpath("tests", "hidden").glob("test_*.py"))


def select(exercises: list[str] | None, suite: str | None, *, root: Path | None = None) -> Selection:
    """Which test files to run; raises UsageError for unknown exercises or suites without tests."""
    root = root or kit_root()
    suite = suite or ("all" if hidden_installed(root) else "public")
    if suite not in SUITES:
        raise UsageError(f"unknown suite {suite!r}: use public, hidden or all")
    if suite in ("hidden", "all") and not hidden_installed(root):
        if suite == "hidden":
            raise UsageError("the hidden tests are not installed in this copy of the kit: use --suite public")
        suite = "public"
    folders = ("public", "hidden") if suite == "all" else (suite,)
    for name in exercises or ():
        if name not in BY_ID:
            known = ", ".join(exercise.id for exercise in EXERCISES)
            raise UsageError(f"unknown exercise {name!r}: choose from {known}")
    wanted = [exercise.id for exercise in EXERCISES if not exercises or exercise.id in exercises]
    files: list[Path] = []
    chosen: list[str] = []
    for exercise_id in wanted:
        found = [root / "tests" / folder / f"test_{exercise_id}.py" for folder in folders]
        found = [path for path in found if path.is_file()]
        if found:
            files += found
            chosen.append(exercise_id)
        elif exercises:
            raise UsageError(f"no {suite} tests for {exercise_id} are installed yet")
    if not chosen:
        raise UsageError(f"no {suite} tests are installed in {root / 'tests'}")
    return Selection(tuple(chosen), suite, tuple(files))


class _Progress:
    """Reports each finished test to a callback (the command line draws a progress bar with it)."""

    def __init__(self, on_test: Callable[[str, str], None] | None) -> None:
        self._on_test = on_test

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._on_test and (report.when == "call" or (report.when == "setup" and not report.passed)):
            self._on_test(report.nodeid, report.outcome)


def grade(
    path: Path,
    selection: Selection,
    *,
    device: str = "auto",
    limits: Limits | None = None,
    on_start: Callable[[int], None] | None = None,
    on_test: Callable[[str, str], None] | None = None,
) -> GradeReport:
    """Grade the submission at `path`; SubmissionInputError and ValueError mean bad input."""
    started = time.monotonic()
    session = GradingSession.open(path, device=device, limits=limits)
    try:
        json_report = JSONReport()
        args = [
            *(str(file) for file in selection.files),
            "--rootdir", str(kit_root()),
            "-c", str(kit_root() / "pyproject.toml"),
            "-o", "addopts=",
            "--import-mode=importlib",
            "-p", "no:cacheprovider",
            "-q",
            "--json-report-file=none",
        ]

        class _Count:
            def pytest_collection_finish(self, session: pytest.Session) -> None:
                if on_start:
                    on_start(len(session.items))

        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            plugins = [json_report, PreparedSession(session), _Progress(on_test), _Count()]
            pytest.main(args, plugins=plugins)
        if json_report.report is None:
            raise RuntimeError(f"pytest did not run the graded suites:\n{sink.getvalue()[-2000:]}")
        exercises = scoring.score(json_report.report, list(selection.exercises))
    finally:
        session.close()
    warnings = [f"submission: {note}" for note in session.submission.notes]
    problem = bwrap_problem()
    if problem:
        warnings.insert(0, f"grading is not isolated: {problem}")
    return GradeReport(
        submission=str(path),
        suite=selection.suite,
        device=session.device,
        duration_s=time.monotonic() - started,
        torch=torch.__version__,
        exercises=tuple(exercises),
        sandbox="none" if problem else "bubblewrap",
        warnings=tuple(warnings),
    )
