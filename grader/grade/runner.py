"""`runner` grades one submission: pytest over the selected suites, in this trusted process.

Flow: submission → staged copy → worker (sandbox) ← trusted tests (pytest) → outcomes → scores.
The worker is started before pytest so that its torch import overlaps with ours. `grade` may be
given a time budget for the whole run (`grader check --timeout`), counted from when the session opened.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from pytest_jsonreport.plugin import JSONReport

from grader.curriculum import exercise_of_test_file, prerequisites
from grader.grade import scoring
from grader.grade.reports import GradeReport
from grader.grade.selection import Selection
from grader.host import tiers
from grader.host.failures import Budget
from grader.host.limits import WorkerStartError
from grader.host.session import GradingSession
from grader.judge.plugin import PreparedSession
from grader.judge.reach import used_names
from grader.kit import kit_root
from grader.lang import N_, plural, tr


class _Progress:
    """Reports the number of tests, then each finished test (the command line draws a progress bar)."""

    def __init__(self, on_start: Callable[[int], None] | None, on_test: Callable[[str, str], None] | None) -> None:
        self._on_start = on_start
        self._on_test = on_test

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self._on_start:
            self._on_start(len(session.items))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._on_test and (report.when == "call" or (report.when == "setup" and not report.passed)):
            self._on_test(report.nodeid, report.outcome)


class _Evidence:
    """Of the tests of the prerequisites run only as evidence for "blocked by" (`Selection.prerequisites`), runs
    those of what the code computes: not those of how it runs (on another device, with loops, trained), which say
    nothing of what builds on it and cost a sandbox's warm-up, a new worker or a training run each."""

    HOW_IT_RUNS = ("real_device", "warm_worker", "fresh_worker", "memory_budget", "slow")

    def __init__(self, prerequisites: tuple[str, ...]) -> None:
        self._files = {f"test_{exercise_id}.py" for exercise_id in prerequisites}

    @pytest.hookimpl(tryfirst=True)  # before grader.judge.plugin's, which asks for a warm sandbox where one is run
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        left_out = [item for item in items if Path(str(item.path)).name in self._files
                    and any(item.get_closest_marker(name) for name in self.HOW_IT_RUNS)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if item not in left_out]


@contextlib.contextmanager
def _no_plugin_autoload() -> Iterator[None]:
    previous = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = previous


def grade(
    session: GradingSession,
    selection: Selection,
    *,
    quick: bool = False,
    timeout_s: float | None = None,
    on_start: Callable[[int], None] | None = None,
    on_test: Callable[[str, str], None] | None = None,
) -> GradeReport:
    """Run the selected suites against an opened session, then close it.

    With `timeout_s`, the run stops calling the submission once that many seconds have passed since
    the session opened: the tests left fail with "time budget of N s used up", and the report says so.
    """
    budget = Budget(timeout_s, started_at=session.opened_at) if timeout_s is not None else None
    session.connection.budget = budget
    try:
        json_report = JSONReport()
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), _no_plugin_autoload():
            plugins = [json_report, PreparedSession(session, budget), _Progress(on_start, on_test),
                       _Evidence(selection.prerequisites)]
            pytest.main(_arguments(selection, quick), plugins=plugins)
        return _report(json_report, session, selection, sink, budget)
    finally:
        session.close()


def collect_then_fork(selection: Selection, fork: Callable[[], GradingSession | None], *, quick: bool = False,
                      feed: FailureFeed | None = None) -> GradeReport | None:
    """Collect the suites once, then grade many submissions, each in a child forked after collection.

    Collecting (importing and parametrizing the suites) costs nearly a second, most of the time a
    stub takes to grade. Here this process collects once and then calls `fork()` until it returns
    None, and this returns None. `fork` forks: in the parent it waits for the child and returns
    only to be called again; in a child it returns the session to grade, and there this function
    returns that submission's report, which the caller writes before the child exits.
    """
    json_report = JSONReport()
    prepared = PreparedSession(None)
    if feed is not None:
        feed.prerequisites = selection.prerequisites
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), _no_plugin_autoload():
        plugins = [json_report, prepared, _ForkAfterCollection(fork, prepared, feed),
                   _Evidence(selection.prerequisites), *([feed] if feed else [])]
        pytest.main(_arguments(selection, quick), plugins=plugins)
    if prepared.session is None:
        return None
    try:
        return _report(json_report, prepared.session, selection, sink, prepared.budget)
    finally:
        prepared.session.close()


class _ForkAfterCollection:
    def __init__(self, fork: Callable[[], GradingSession | None], prepared: PreparedSession,
                 feed: FailureFeed | None = None) -> None:
        self._fork = fork
        self._prepared = prepared
        self._feed = feed

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        self._prepared.session = self._fork()
        if self._prepared.session is not None:  # the child: its budget, if the job set one on the connection
            self._prepared.budget = self._prepared.session.connection.budget
            if self._feed is not None:
                self._feed.uses = used_names(self._prepared.session.submission.files)
        # In a child, pytest's own loop now runs the tests; in the parent, nothing is left to run.
        return None if self._prepared.session is not None else True


class FailureFeed:
    """Appends each failed test's feedback to `path` as it happens, one JSON line each: for `grader watch`,
    which shows the first failure before the whole exercise has run. `path` is set in the forked child.

    Not fed: the failures of `prerequisites` (the selection's, run unreported), and those of an exercise already
    blocked, on scoring's evidence, by a prerequisite that failed before: a failed test of the prerequisite's names
    that the exercise's code uses (`uses`, `scoring.ties`), or a test stopped in the prerequisite's unwritten code.
    Scoring rewrites these as "blocked by", and their hints may blame code that is right."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.prerequisites: tuple[str, ...] = ()
        self.uses: dict[str, frozenset[str]] = {}  # set in the child, from its submission (`reach.used_names`)
        self._failed: dict[str, list[tuple[str, ...]]] = {}  # exercise -> what each of its failed tests exercises

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.path is None or not report.failed:
            return
        metadata = getattr(report, "_json_report_extra", {}).get("metadata", {})
        exercise = exercise_of_test_file(Path(report.nodeid.split("::")[0]).name)
        if exercise is not None:
            used = self.uses.get(exercise, frozenset())
            causes = metadata.get("causes") or ()
            blocked = exercise in self.prerequisites or any(
                f"blocked:{need}" in causes or any(scoring.ties(names, need, used) for names in self._failed[need])
                for need in prerequisites(exercise) if need in self._failed)
            if metadata.get("points", 1.0) > 0:
                self._failed.setdefault(exercise, []).append(tuple(metadata.get("contract_names") or ()))
            if blocked:
                return
        message = metadata.get("message", "")
        with contextlib.suppress(OSError), self.path.open("a", encoding="utf-8") as feed:
            feed.write(json.dumps({"test": report.nodeid, "message": message}) + "\n")


def _arguments(selection: Selection, quick: bool) -> list[str]:
    return [
        *(str(file) for file in selection.files),
        "--rootdir", str(kit_root()),
        "-c", str(kit_root() / "pyproject.toml"),
        "-o", "addopts=",
        "--import-mode=importlib",
        # Graded asserts carry their own feedback; pytest's rewritten diff would only clutter it.
        "--assert=plain",
        # Plugins are named, never auto-loaded: a third-party pytest plugin installed on the
        # machine has no say in a grade, and rewriting its asserts cost seconds.
        "-p", "pytest_jsonreport.plugin",
        "-p", "no:cacheprovider",
        "-p", "no:unraisableexception",
        "-p", "no:threadexception",
        # Trusted tests do not log, and nothing reads captured logs or streams: capturing them
        # for every test (pytest and the JSON report each do) is pure overhead.
        "-p", "no:logging",
        "--json-report-omit", "log", "streams",
        "-q",
        # Feedback is the plugin's own message per test; pytest's source-annotated tracebacks
        # are never shown and cost over 10 s when every test of a stub fails.
        "--tb=no",
        "--json-report-file=none",
        *(["--quick"] if quick else []),
    ]


def _report(json_report: JSONReport, session: GradingSession, selection: Selection, sink: io.StringIO,
            budget: Budget | None = None) -> GradeReport:
    if json_report.report is None:
        raise RuntimeError(f"pytest did not run the graded suites:\n{sink.getvalue()[-2000:]}")
    if json_report.report.get("exitcode") == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt  # a partial run is no grade: report nothing rather than a low score
    if json_report.report.get("exitcode") == pytest.ExitCode.INTERNAL_ERROR:
        # pytest stopped mid-run (a defect of a hook of ours): the tests it did not reach would count as absent.
        raise RuntimeError(f"pytest stopped with an internal error:\n{_internal_error(sink.getvalue())}")
    if session.connection.sandbox_failure is not None:
        # No score from a run whose sandbox broke: the caller fails (exit 3) or grades it again.
        raise WorkerStartError(f"the sandbox failed twice: {session.connection.sandbox_failure}")
    exercises = scoring.score(json_report.report, list(selection.exercises), session.submission.missing,
                              prerequisites_run=selection.prerequisites, uses=used_names(session.submission.files))
    warnings = [tr("submission: {note}", note=note) for note in session.submission.notes]
    tier = session.tier
    if tier != "bubblewrap":
        warnings[:0] = tiers.warnings(tier, session.exposed(), session.reasons())
    if budget is not None and budget.used_up:
        warnings.append(plural(
            budget.tests_not_run,
            N_("{budget}: 1 test was not run and scores 0; grade with a larger --timeout to run it"),
            N_("{budget}: {count} tests were not run and score 0; grade with a larger --timeout to run them all"),
            budget=budget.message))
    return GradeReport(
        submission=str(session.path),
        suite=selection.suite,
        device=session.device,
        duration_s=time.monotonic() - session.opened_at,
        torch=torch.__version__,
        exercises=tuple(replace(exercise, files=session.submission.sources.get(f"{exercise.id}.py", ()))
                        for exercise in exercises),
        sandbox=tier,
        warnings=tuple(warnings),
        time_budget_s=budget.seconds if budget is not None else None,
        budget_exhausted=budget is not None and budget.used_up,
        seed=session.seed,
    )


def _internal_error(output: str) -> str:
    """The last lines of pytest's INTERNALERROR traceback: where our hook failed."""
    lines = [line.removeprefix("INTERNALERROR> ") for line in output.splitlines() if line.startswith("INTERNALERROR>")]
    return "\n".join(lines[-6:]) or output[-2000:]
