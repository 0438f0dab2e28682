"""`results` holds what grading yields: each test's outcome and points, each exercise's result and status, and the
shape of the pytest-json-report report `scoring` reads them from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict


class TestOutcome(StrEnum):
    """How one graded test ended, as the report names it."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def went_wrong(self) -> bool:
        """Failed or errored: the test ran, or tried to, and did not pass."""
        return self in (TestOutcome.FAILED, TestOutcome.ERROR)


class ExerciseStatus(StrEnum):
    """Where a student stands on one exercise, as the command line and the saved progress name it."""

    DONE = "done"
    SLOW_TESTS_SKIPPED = "slow tests skipped"
    NOT_STARTED = "not started"
    FAILING = "failing"
    NOT_SUBMITTED = "not in this submission"


class TestMetadata(TypedDict, total=False):
    """What `grader.judge.plugin` attaches to each test in the pytest-json-report report."""

    exercise: str
    points: float
    suite: str
    contract_names: list[str]  # what the test calls the submission's code by (`grader.judge.reach.tested_names`)
    confirmed_by: list[str]
    hint_after: list[str]
    hint_measured: bool
    counts_when_skipped: bool
    seed: int
    message: str
    diagnosed: list[str]
    causes: list[str]


class PytestJsonStage(TypedDict, total=False):
    outcome: str
    longrepr: str


class PytestJsonTest(TypedDict, total=False):
    """One test of a pytest-json-report report (external JSON: any key may be missing)."""

    nodeid: str
    outcome: str
    metadata: TestMetadata
    setup: PytestJsonStage


class PytestJsonCollector(TypedDict, total=False):
    nodeid: str
    outcome: str
    longrepr: str


class PytestJsonReport(TypedDict, total=False):
    """What scoring reads of a pytest-json-report report of the graded suites."""

    exitcode: int
    tests: list[PytestJsonTest]
    collectors: list[PytestJsonCollector]


@dataclass(frozen=True)
class TestResult:
    name: str
    outcome: TestOutcome
    points: float
    max_points: float
    message: str
    seed: int | None = None
    causes: tuple[str, ...] = ()  # what the trusted side knows stopped it (grader.host.failures.CAUSES)

    def stopped(self, cause: str) -> bool:
        """Whether `cause` ("unwritten", "timeout") or a cause of that kind ("blocked", "missing") stopped it."""
        return any(found == cause or found.startswith(f"{cause}:") for found in self.causes)


@dataclass(frozen=True)
class ExerciseResult:
    id: str
    score: float
    max_score: float
    tests: tuple[TestResult, ...]
    blocked_by: tuple[str, ...] = ()
    absent: str = ""  # why it was not graded: its file, or one it builds on, is not in the submission
    diagnosed: tuple[str, ...] = ()  # the catalogue's names of the known mistakes its failures come from
    files: tuple[str, ...] = ()  # what was graded: the submission's files its code was read from (paths in it)


    @property
    def passed(self) -> int:
        """The tests passed among those that count (`counted`): one worth no points here is feedback only."""
        return sum(test.outcome == TestOutcome.PASSED and test.max_points > 0 for test in self.tests)

    @property
    def counted(self) -> int:
        return sum(test.max_points > 0 for test in self.tests)

    @property
    def status(self) -> ExerciseStatus:
        if self.absent:
            return ExerciseStatus.NOT_SUBMITTED
        if self.counted and self.passed == self.counted:
            return ExerciseStatus.DONE
        if self.passed and all(test.outcome in (TestOutcome.PASSED, TestOutcome.SKIPPED) for test in self.tests):
            return ExerciseStatus.SLOW_TESTS_SKIPPED
        if self.tests and all(
            test.outcome == TestOutcome.SKIPPED or test.stopped("unwritten") for test in self.tests
        ):
            return ExerciseStatus.NOT_STARTED
        return ExerciseStatus.FAILING
