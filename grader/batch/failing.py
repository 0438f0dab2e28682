"""`failing` finds the tests a class fails most: each test once, its parametrised cases folded, counted in students,
its failures grouped by what the trusted side knows caused them.

A cause is read from a report's structured fields, never from a message's words (which a submission can write and
which change with the language): a known mistake the diagnosis named for the exercise (`mistake:<name>`), a limit
(`timeout`, `crash`, `memory`), code left unwritten (`unwritten`), or none of these (`undiagnosed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.grade.results import ExerciseResult, TestOutcome, TestResult

EXAMPLE_CHARACTERS = 400  # of one failure's message, beside a test most students fail
HARDEST = 10  # how many tests the class fails most are listed
LIMITS = ("timeout", "crash", "memory")  # the causes of a test's failure that are limits (grader.host.failures)
UNDIAGNOSED = "undiagnosed"
# A failure another one explains: a structure test waiting for a behaviour test, a call stopped in another exercise.
CONSEQUENCES = ("waits", "blocked")


@dataclass(frozen=True)
class FailureCause:
    """Some students fail a test for one cause (see the module's docstring): who, and the message most of them
    failed with."""

    cause: str
    count: int
    ids: list[str]
    example: str  # the first line most of them failed with (a student's own words may be in it)
    example_from: str  # the first submission, in id order, that failed with it


@dataclass(frozen=True)
class HardTest:
    """A test that some graded submissions fail, its parametrised cases folded into one, counted in students among
    those where it judged the exercise's own code (not blocked by a failing prerequisite, not an unstarted stub):
    a student fails it who fails any case on its own (not only waiting for, or stopped in, another test)."""

    name: str  # "exercise: suite/test_file.py::test_name", without its parameters
    pass_rate: float  # the share of those students who failed no case
    failed: int
    exercise: str = ""
    example: str = ""  # the message most of them failed with (a student's own words may be in it)
    example_from: str = ""  # the first submission, in id order, that failed with it
    cases: int = 1  # how many parametrised cases were folded into it
    causes: list[FailureCause] = field(default_factory=list)  # the most frequent first
    # The exercise's other tests that the same students fail for the same causes ("suite/file.py::test"): one
    # mistake fails many tests, and is one row.
    same: list[str] = field(default_factory=list)


def hardest_tests(judged: list[tuple[str, list[ExerciseResult]]]) -> list[HardTest]:
    """The tests the most students fail (then the lowest pass rate, then by name), of the exercises that judged the
    student's own code, those of an exercise that the same students fail for the same causes as one (`same`); a test
    that errored because its file did not import is counted apart (`did_not_import`)."""
    seen: dict[str, set[str]] = {}
    cases: dict[str, set[str]] = {}
    failures: dict[str, dict[str, tuple[set[str], str]]] = {}  # test -> who -> (causes, first message)
    for who, exercises in judged:
        for exercise in exercises:
            for test in exercise.tests:
                if not _judged(test):
                    continue
                function = test.name.split("[", 1)[0]
                name = f"{exercise.id}: {function}"
                seen.setdefault(name, set()).add(who)
                cases.setdefault(name, set()).add(test.name)
                if test.outcome != TestOutcome.PASSED:
                    causes, message = failures.setdefault(name, {}).setdefault(who, (set(), test.message))
                    causes.update(cause_of(test, exercise))
    ranked = sorted(failures, key=lambda n: (-len(failures[n]), 1 - len(failures[n]) / len(seen[n]), n))
    rows: dict[tuple[object, ...], HardTest] = {}
    for name in ranked:
        test = _hard_test(name, len(seen[name]), len(cases[name]), failures[name])
        key = (test.exercise, *((found.cause, *found.ids) for found in test.causes))
        if key in rows:
            rows[key].same.append(name.partition(": ")[2])
        else:
            rows[key] = test
    return list(rows.values())[:HARDEST]


def cause_of(test: TestResult, exercise: ExerciseResult) -> list[str]:
    """Why `test` of `exercise` failed, as the module's docstring names causes."""
    limits = [cause for cause in test.causes if cause in LIMITS]
    if limits:
        return limits
    if test.stopped("unwritten"):
        return ["unwritten"]
    return [f"mistake:{name}" for name in exercise.diagnosed] or [UNDIAGNOSED]


def waits_for(test: TestResult) -> list[str]:
    """The behaviour tests a failed structure test waits for; [] for any other test."""
    return [cause.removeprefix("waits:") for cause in test.causes if cause.startswith("waits:")]


def _judged(test: TestResult) -> bool:
    """Whether `test` judged what it checks: it ran (an error never got to check anything: its file did not import),
    counts for points, and failed, if it did, on its own."""
    return (test.outcome not in (TestOutcome.SKIPPED, TestOutcome.ERROR) and test.max_points > 0
            and not any(test.stopped(cause) for cause in CONSEQUENCES))


def _hard_test(name: str, seen: int, cases: int, failures: dict[str, tuple[set[str], str]]) -> HardTest:
    by_cause: dict[str, dict[str, list[str]]] = {}  # cause -> message -> who
    for who in sorted(failures):
        causes, message = failures[who]
        for cause in sorted(causes):
            by_cause.setdefault(cause, {}).setdefault(excerpt(first_line(message)), []).append(who)
    causes = []
    for cause, messages in by_cause.items():
        ids = sorted(who for group in messages.values() for who in group)
        causes.append(FailureCause(cause, len(ids), ids, *most_common(messages)))
    causes.sort(key=lambda found: (-found.count, found.cause))
    messages: dict[str, list[str]] = {}
    for who in sorted(failures):
        messages.setdefault(excerpt(failures[who][1]), []).append(who)
    return HardTest(name, round(1 - len(failures) / seen, 4), len(failures), name.partition(": ")[0],
                    *most_common(messages), cases=cases, causes=causes)


def most_common(messages: dict[str, list[str]]) -> tuple[str, str]:
    """The message most submissions failed with (ties: the one first in id order), and the first of them: one
    student's words never stand for the class unless most of the class wrote them."""
    message = min(messages, key=lambda m: (-len(messages[m]), min(messages[m])))
    return message, min(messages[message])


def first_line(message: str) -> str:
    """A message's first line (after leading blank ones); "" for an empty one."""
    return next(iter(message.strip().splitlines()), "")


def excerpt(message: str, limit: int = EXAMPLE_CHARACTERS) -> str:
    """The message, or its first `limit` characters cut at a space, with an ellipsis that says it was cut."""
    if len(message) <= limit:
        return message
    return message[:limit].rsplit(" ", 1)[0] + " …"
