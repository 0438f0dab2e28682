"""`scoring` turns pytest outcomes into points: per test, per exercise, and the total.

A test's `points` marker is its weight inside its exercise; the weights of the tests that ran are
scaled so that each exercise is worth exactly its points in the curriculum, whichever suites ran.
A test that failed, errored or never ran scores 0; a skipped test does not count either way,
except one skipped by --quick, which counts as 0 so that a quick run never looks complete.

What a structure test checks (names, shapes, buffers) is the worker's account of the module, which
the submission can rewrite; so a test marked `confirmed_by(...)` keeps its pass only when the
behaviour tests it names (which load the reference's weights by those names and compare outputs,
here in the trusted process) ran and passed too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from grader.curriculum import BY_ID, exercise_of_test_file, prerequisites
from grader.grade.results import (  # noqa: F401 - re-exported: what scoring yields, by its old names
    ExerciseResult,
    ExerciseStatus,
    PytestJsonCollector,
    PytestJsonReport,
    PytestJsonStage,
    PytestJsonTest,
    TestMetadata,
    TestOutcome,
    TestResult,
)
from grader.lang import listed, tr, typeset
from grader.markers import diagnoses, hint_pattern, hint_suffix


@dataclass(frozen=True)
class _Raw:
    name: str
    exercise: str
    outcome: TestOutcome
    weight: float
    message: str
    seed: int | None
    counted: bool
    confirmed_by: tuple[str, ...] = ()
    hint_after: tuple[str, ...] = ()
    hint_measured: bool = False
    diagnosed: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()  # the contract names the test calls the submission's code by


def score(json_report: PytestJsonReport, exercise_ids: list[str], missing: frozenset[str] = frozenset(), *,
          prerequisites_run: Sequence[str] = (), uses: Mapping[str, frozenset[str]] | None = None
          ) -> list[ExerciseResult]:
    """Exercises in curriculum order, from a pytest-json-report report of the graded suites; `missing`, the exercise
    files the submission does not hold (see `not_submitted`); `prerequisites_run`, exercises the graded ones build on
    whose tests ran only as evidence for "blocked by" (`Selection.prerequisites`): they are not among the results;
    `uses`, the contract names of other exercises each exercise's code uses (`grader.judge.reach.used_names`)."""
    tests = sorted(json_report.get("tests", []), key=_collected_order)  # the order run is not always that one
    raws = _hints_that_hold(_confirmed([_raw(test) for test in tests]))
    tested = {raw.name: raw.names for raw in raws}
    broken = _broken_collections(json_report)
    results = []
    for exercise_id in [*exercise_ids, *(need for need in prerequisites_run if need not in exercise_ids)]:
        mine = [raw for raw in raws if raw.exercise == exercise_id]
        results.append(_exercise(exercise_id, mine, broken.get(exercise_id)))
    marked = _mark_blocked(not_submitted(results, missing), uses or {}, tested)
    return [_typeset(result) for result in marked if result.id in exercise_ids]


def _typeset(result: ExerciseResult) -> ExerciseResult:
    """The result with its tests' messages set as their language wants: sentences joined after a Chinese full stop
    or colon have no space between them (the judge's and this module's "message + hint" joins put one)."""
    return replace(result, tests=tuple(replace(test, message=typeset(test.message)) for test in result.tests))


def not_submitted(results: list[ExerciseResult], missing: frozenset[str]) -> list[ExerciseResult]:
    """An exercise whose file is not in the submission (a single notebook, a folder with some files), or that
    imports one that is not (every test stopped there), scores 0 with one line that says so, not with the
    failures of every test."""
    marked = []
    for result in results:
        file = BY_ID[result.id].file
        needed = _needs_missing(result, missing)
        if file in missing:
            absent = tr("{file} is not in this submission", file=file)
        elif needed is not None:
            absent = tr("it builds on {file}, which is not in this submission", file=needed)
        else:
            marked.append(result)
            continue
        marked.append(ExerciseResult(result.id, 0.0, result.max_score, (), (), absent))
    return marked


def _needs_missing(result: ExerciseResult, missing: frozenset[str]) -> str | None:
    """The missing file every test of `result` stopped at, importing it (or importing a file that imports it); None
    when any test got further."""
    found = {cause.removeprefix("missing:") for test in result.tests for cause in test.causes
             if cause.startswith("missing:")}
    stopped = [test for test in result.tests if test.outcome != TestOutcome.SKIPPED]
    if not stopped or not all(test.stopped("missing") for test in stopped):
        return None
    return next((name for name in sorted(found) if name in missing), None)


def _mark_blocked(results: list[ExerciseResult], uses: Mapping[str, frozenset[str]],
                  tested: Mapping[str, tuple[str, ...]]) -> list[ExerciseResult]:
    """Point failures at a prerequisite that fails its own tests in the same run, graded or run only for this, where
    the evidence ties them to it (`_evidence`): the place to look first. The failures' hints guess at a cause in the
    exercise's own code; they give way to one that says what the prerequisite fails."""
    failing = {result.id: result for result in results if _fails(result)}
    marked = []
    for result in results:
        if result.id not in failing or _not_started(result):
            marked.append(result)  # an unwritten exercise is not blocked: writing it is the next step
            continue
        evidence = {need: _evidence(result, failing[need], uses.get(result.id, frozenset()), tested)
                    for need in prerequisites(result.id) if need in failing}
        blockers = tuple(need for need, found in evidence.items() if found)
        if not blockers:
            marked.append(result)
            continue
        if len(blockers) == 1:
            note = tr("blocked by {names}: it fails its own tests and {exercise} builds on it, so fix it first.",
                      names=blockers[0], exercise=result.id)
        else:
            names = listed(blockers)
            note = tr("blocked by {names}: they fail their own tests and {exercise} builds on them, so fix them first.",
                      names=names, exercise=result.id)
        pointer = hint_suffix(_what_fails(blockers[0], evidence[blockers[0]]))  # the first in the curriculum
        tests = tuple(
            replace(test, message=_blocked_message(note, test.message, pointer))
            if test.outcome.went_wrong and not test.stopped("blocked") else test
            for test in result.tests
        )
        marked.append(replace(result, tests=tests, blocked_by=blockers))
    return marked


def _fails(result: ExerciseResult) -> bool:
    """Whether a test of `result` went wrong, and counts: not one skipped by --quick, not an absent file's."""
    return (result.status in (ExerciseStatus.FAILING, ExerciseStatus.NOT_STARTED)
            and any(test.outcome.went_wrong for test in result.tests))


def _evidence(result: ExerciseResult, prerequisite: ExerciseResult, used: frozenset[str],
              tested: Mapping[str, tuple[str, ...]]) -> list[TestResult]:
    """The failing tests of `prerequisite` (those that count) that tie `result`'s failures to it: all of them where a
    test of `result` stopped in the prerequisite's unwritten code; else those that exercise names of the prerequisite
    that `result`'s code uses (`used`), and no other of its names (a test of causal_mask against create_look_ahead_mask
    may fail for the one a MultiHeadAttention does not use). None where only the curriculum says it builds on it, for
    the code may not (a MultiHeadAttention through F.scaled_dot_product_attention never calls attention())."""
    wrong = [test for test in prerequisite.tests if test.outcome.went_wrong and test.max_points > 0]
    if any(test.stopped(f"blocked:{prerequisite.id}") for test in result.tests):
        return wrong
    return [test for test in wrong if ties(tested.get(test.name, ()), prerequisite.id, used)]


def ties(names: Sequence[str], prerequisite: str, used: frozenset[str]) -> bool:
    """Whether a failing test of `prerequisite` that exercises `names` is evidence against code that uses `used`: it
    exercises names of the prerequisite, all of them used."""
    exercised = set(names).intersection(BY_ID[prerequisite].names)
    return bool(exercised) and exercised <= used


def _blocked_message(note: str, message: str, pointer: str) -> str:
    """`note`, then the failure's first line with its own hints replaced by `pointer`, then its other lines (a
    diagnosis, what the code printed)."""
    first, newline, rest = message.partition("\n")
    return f"{note} {hint_pattern().sub('', first)}{pointer}{newline}{rest}"


def _what_fails(prerequisite: str, wrong: list[TestResult]) -> str:
    """What a failing prerequisite's own tests `wrong` say: its known mistake where one was diagnosed, else its first
    failure (one that waits for no other test, where there is one)."""
    own = [test for test in wrong if not test.stopped("waits")] or wrong
    first = next((test for test in own if diagnoses(test.message)), own[0])
    why = next(iter(diagnoses(first.message)), "") or hint_pattern().sub("", first.message.partition("\n")[0])
    if len(why) > 300:
        why = why[:300] + " [...]"
    return tr("{prerequisite} fails its test {test}: {why}", prerequisite=prerequisite,
              test=first.name.rpartition("::")[2], why=why)


def _not_started(result: ExerciseResult) -> bool:
    """Every test that ran stopped at the exercise's own unwritten code (not at a prerequisite's)."""
    ran = [test for test in result.tests if test.outcome != TestOutcome.SKIPPED]
    return bool(ran) and all(test.stopped("unwritten") and not test.stopped("blocked") for test in ran)


def _collected_order(test: PytestJsonTest) -> int:
    order = (test.get("metadata") or {}).get("order")
    return order if isinstance(order, int) else -1


def _raw(test: PytestJsonTest) -> _Raw:
    metadata: TestMetadata = test.get("metadata") or {}
    nodeid = str(test.get("nodeid", ""))
    outcome = _outcome(str(test.get("outcome", "error")))
    message = str(metadata.get("message", ""))
    if outcome == TestOutcome.SKIPPED and not message:
        longrepr = (test.get("setup") or {}).get("longrepr") or ""
        message = str(longrepr)[-300:]
    if outcome.went_wrong and not message:
        message = tr("the test did not complete")
    causes = tuple(str(cause) for cause in metadata.get("causes") or ())
    if outcome == TestOutcome.FAILED and any(cause.startswith(("import:", "missing:")) for cause in causes):
        outcome = TestOutcome.ERROR  # the test never got to check anything: the file it needs does not import
    exercise = metadata.get("exercise") or exercise_of_test_file(Path(nodeid.split("::")[0]).name) or ""
    return _Raw(
        name=nodeid.removeprefix("tests/"),
        exercise=exercise,
        outcome=outcome,
        weight=float(metadata.get("points", 1.0)),
        message="" if outcome == TestOutcome.PASSED else message,
        seed=metadata.get("seed"),
        counted=outcome != TestOutcome.SKIPPED or bool(metadata.get("counts_when_skipped")),
        confirmed_by=tuple(str(name) for name in metadata.get("confirmed_by") or ()),
        hint_after=tuple(str(name) for name in metadata.get("hint_after") or ()),
        hint_measured=bool(metadata.get("hint_measured")),
        diagnosed=tuple(str(name) for name in metadata.get("diagnosed") or ()),
        causes=causes,
        names=tuple(str(name) for name in metadata.get("contract_names") or ()),
    )


def _outcome(pytest_outcome: str) -> TestOutcome:
    """The report's outcome for pytest's: an expected failure that happened failed; anything unknown is an error."""
    pytest_outcome = {"xfailed": "failed", "xpassed": "passed"}.get(pytest_outcome, pytest_outcome)
    try:
        return TestOutcome(pytest_outcome)
    except ValueError:
        return TestOutcome.ERROR


def _confirmed(raws: list[_Raw]) -> list[_Raw]:
    """A passed structure test fails when no behaviour test it names ran, or one of them did not pass."""
    by_function: dict[tuple[str, str], list[_Raw]] = {}
    for raw in raws:
        file, _, function = raw.name.partition("::")
        by_function.setdefault((file, function.split("[")[0]), []).append(raw)
    result = []
    for raw in raws:
        file = raw.name.partition("::")[0]
        behaviour = [other for name in raw.confirmed_by for other in by_function.get((file, name), [])
                     if other.outcome != TestOutcome.SKIPPED]
        if raw.outcome == TestOutcome.PASSED and raw.confirmed_by and (
                not behaviour or any(other.outcome != TestOutcome.PASSED for other in behaviour)):
            waited = list(dict.fromkeys(raw.confirmed_by))
            names = listed(waited)
            message = (tr("the names and shapes the submission reports count only once its behaviour confirms them, "
                          "and {names} did not pass (loaded with the reference's weights by these names, the module "
                          "must compute what the reference computes): fix that first.", names=names) if behaviour
                       else tr("the names and shapes the submission reports count only once its behaviour confirms "
                               "them, and {names} did not run (loaded with the reference's weights by these names, the "
                               "module must compute what the reference computes): fix that first.", names=names))
            raw = replace(raw, outcome=TestOutcome.FAILED, message=message,
                          causes=(*raw.causes, *(f"waits:{name}" for name in waited)))
        result.append(raw)
    return result




def _hints_that_hold(raws: list[_Raw]) -> list[_Raw]:
    """A failed test's hint assumes what the tests its `hint_after` names check (a mask's hint, that attention
    without the mask is right): where one of them ran and failed too, the hint has no evidence, so it goes, and the
    message says which failed. A hint from what the failure itself measured (a known mistake, NaN) stays. A name is
    `function` (every case of it but this one) or `function[case]`, in the test's own file."""
    by_name: dict[tuple[str, str], list[_Raw]] = {}
    for raw in raws:
        file, _, function = raw.name.partition("::")
        by_name.setdefault((file, function), []).append(raw)
        if "[" in function:
            by_name.setdefault((file, function.split("[")[0]), []).append(raw)
    result = []
    for raw in raws:
        file = raw.name.partition("::")[0]
        failed = [name for name in dict.fromkeys(raw.hint_after)
                  if any(other is not raw and other.outcome.went_wrong for other in by_name.get((file, name), []))]
        if raw.outcome.went_wrong and failed and not raw.hint_measured and hint_pattern().search(raw.message):
            names = " and ".join(failed)
            raw = replace(raw, message=hint_pattern().sub("", raw.message, count=1) + " " + (
                tr("(No hint here: {names} fail too; start there.)", names=names) if len(failed) > 1
                else tr("(No hint here: {names} fails too; start there.)", names=names)))
        result.append(raw)
    return result


def _broken_collections(json_report: PytestJsonReport) -> dict[str, str]:
    """Test files that could not even be collected: their exercise scores 0 with this message."""
    broken: dict[str, str] = {}
    for collector in json_report.get("collectors", []):
        if collector.get("outcome") != "failed":
            continue
        exercise = exercise_of_test_file(Path(str(collector.get("nodeid", ""))).name)
        if exercise:
            broken[exercise] = tr("the tests could not be loaded: {error}",
                                  error=str(collector.get("longrepr", ""))[-400:])
    return broken


def _exercise(exercise_id: str, raws: list[_Raw], broken: str | None) -> ExerciseResult:
    maximum = float(BY_ID[exercise_id].points)
    counted = [raw for raw in raws if raw.counted and raw.weight > 0]  # a test worth 0 (real_device on a CPU)
    total_weight = sum(raw.weight for raw in counted)
    if broken is not None or total_weight <= 0:
        tests = tuple(TestResult(r.name, r.outcome, 0.0, 0.0, r.message, r.seed, r.causes) for r in raws)
        if broken is not None:
            tests += (TestResult(f"{exercise_id} (loading tests)", TestOutcome.ERROR, 0.0, maximum, broken),)
        return ExerciseResult(exercise_id, 0.0, maximum, tests)
    shares = _shares(maximum, [raw.weight for raw in counted])
    share_of = {id(raw): share for raw, share in zip(counted, shares, strict=True)}
    tests = tuple(
        TestResult(
            raw.name,
            raw.outcome,
            share_of.get(id(raw), 0.0) if raw.outcome == TestOutcome.PASSED else 0.0,
            share_of.get(id(raw), 0.0),
            raw.message,
            raw.seed,
            raw.causes,
        )
        for raw in raws
    )
    diagnosed = tuple(dict.fromkeys(name for raw in raws for name in raw.diagnosed))
    return ExerciseResult(exercise_id, round(sum(test.points for test in tests), 4), maximum, tests,
                          diagnosed=diagnosed)


def _shares(maximum: float, weights: list[float]) -> list[float]:
    """Each weight's part of `maximum`, rounded to 4 places; the last takes the rounding remainder,
    so that the parts add up to `maximum` exactly and a report's tests add up to its exercise."""
    total = sum(weights)
    shares = [round(maximum * weight / total, 4) for weight in weights[:-1]]
    return [*shares, round(maximum - math.fsum(shares), 4)]
