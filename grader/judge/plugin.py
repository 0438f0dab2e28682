"""`plugin` is the pytest side of grading: fixtures `impl`, `ref`, `device`, `seed`, and per-test metadata.

Graded tests read like ordinary PyTorch:

    def test_rows_sum_to_one(impl, device):
        out, p_attn = impl.attention.attention(q, k, v)

`impl` is the sandboxed submission, `ref` the reference solutions imported here, in the trusted
process. Each test's exercise, points, seed and a short failure message are attached to the
pytest-json-report entry, from which `scoring` computes the grade. An exercise's first failed test
also names the known mistake behind it, where `diagnosis` recognises one. Under `grader check`, once
the run's time budget is spent, every test left fails at once without running.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TypeAlias

import pytest
import torch

from grader import markers
from grader.curriculum import exercise_of_test_file, prerequisites
from grader.host import seeds
from grader.host.failures import Budget, BudgetExhausted, NotImplementedYet, WorkerCrash
from grader.host.remote import RemoteSubmission
from grader.host.session import GradingSession
from grader.inside.shared import TEST_MODULES
from grader.judge.checks import NAN_HINT, manual_seed
from grader.judge.feedback import MAX_MESSAGE_CHARS, causes_of, feedback
from grader.judge.measures import fresh_worker
from grader.judge.reach import tested_names
from grader.kit import kit_root
from grader.lang import N_, tr

_SESSION = pytest.StashKey[GradingSession]()
_MARKS = pytest.StashKey[tuple[int, int]]()
_MESSAGE_SET = pytest.StashKey[bool]()
_SEED = pytest.StashKey[int]()
_ORDER = pytest.StashKey[int]()
_DIAGNOSED = pytest.StashKey[dict[str, str]]()  # exercise -> what its first failure's diagnosis found
_WANTS_WARM = pytest.StashKey[bool]()  # tests that need a warm worker were collected
_NAMED = pytest.StashKey[dict[str, list[str]]]()  # exercise -> the catalogue's names of the mistakes it found
_FAILED = pytest.StashKey[set[str]]()  # exercises with a failed test so far in this run
DIAGNOSIS_CALL_TIMEOUT_S = 5.0  # the scenario's calls are small; a slow one means there is nothing to learn
QUICK_SKIP = N_("skipped by --quick: run without --quick to earn these points")  # shown as tr(QUICK_SKIP)
# What pytest-json-report stores with a test, for `scoring`: plain JSON values by key.
Metadata: TypeAlias = dict[str, str | int | float | bool | list[str] | None]


class PreparedSession:
    """Passed to pytest by the `grader` command: a session whose worker is already warming up.

    `session` may be set after collection, before the first test (`runner.collect_then_fork`).
    `budget`, when given, is the whole run's time budget (`grader check --timeout`); the caller
    also hands it to the session's connection, which bounds each call by it."""

    def __init__(self, session: GradingSession | None, budget: Budget | None = None) -> None:
        self.session = session
        self.budget = budget


def _prepared(config: pytest.Config) -> PreparedSession | None:
    return next((p for p in config.pluginmanager.get_plugins() if isinstance(p, PreparedSession)), None)


def _budget(config: pytest.Config) -> Budget | None:
    prepared = _prepared(config)
    return prepared.budget if prepared is not None else None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader", "grading a submission")
    group.addoption("--submission", default=None, help="folder or .zip to grade (default: the kit's exercises/)")
    group.addoption("--grader-device", default="auto", choices=("auto", "cpu", "cuda"))
    group.addoption("--quick", action="store_true", help="skip tests marked slow (they still count, as 0)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "points(n): points this test is worth inside its exercise")
    config.addinivalue_line("markers", "call_timeout(seconds): wall-clock limit for each call into the submission")
    config.addinivalue_line("markers", "slow: takes seconds (the capstone); --quick skips it at the cost of its points")
    config.addinivalue_line("markers", "confirmed_by(*tests): a structure test's points count only once these "
                                       "behaviour tests of its file pass too (see scoring)")
    config.addinivalue_line("markers", "hint_after(*tests): a failure's hint assumes these tests of its file pass; "
                                       "where one fails too, the hint is left out (see scoring)")
    config.addinivalue_line("markers", "real_device: its points count only in a run on a GPU (--device cuda); on a "
                                       "CPU its check is feedback worth no points (a submission can tell a stand-in "
                                       "device from a real one)")
    config.addinivalue_line("markers", "warm_worker: runs after the other tests, in a worker forked once the sandbox "
                                       "had warmed up (torch._dynamo imported: fake tensors and torch.optim start "
                                       "at once there)")
    config.addinivalue_line("markers", "fresh_worker: runs last, in a new worker that has imported only what the test "
                                       "imports (what grader.judge.loops reads)")
    config.addinivalue_line("markers", "memory_budget(mib): runs last, in a new worker whose memory may grow at most "
                                       "mib MiB above its sandbox's zygote (torch imported), enforced by rlimits set "
                                       "before the submission's code runs; where the grader cannot bound a worker's "
                                       "memory (spawned workers: macOS, Windows) it is skipped and worth no points")
    torch.set_num_threads(1)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None and _prepared(config) is None:
        session.close()


@pytest.fixture(scope="session")
def grading(pytestconfig: pytest.Config) -> GradingSession:
    if _SESSION not in pytestconfig.stash:
        prepared = _prepared(pytestconfig)
        if prepared is not None and prepared.session is not None:
            session = prepared.session
        else:
            path = pytestconfig.getoption("submission") or str(kit_root() / "exercises")
            session = GradingSession.open(Path(path), device=pytestconfig.getoption("grader_device"))
        pytestconfig.stash[_SESSION] = session
        if pytestconfig.stash.get(_WANTS_WARM, False):
            session.workers.want_warm()
    return pytestconfig.stash[_SESSION]


@pytest.fixture
def impl(grading: GradingSession, request: pytest.FixtureRequest) -> Iterator[RemoteSubmission]:
    """The submission under test, running in the sandboxed worker."""
    marker = request.node.get_closest_marker("call_timeout")
    connection = grading.connection
    connection.call_timeout_s = float(marker.args[0]) if marker else None
    memory = request.node.get_closest_marker("memory_budget")
    if memory is not None and not grading.workers.sandbox.bounds_memory:
        pytest.skip(tr("not measured here: this machine's grader cannot bound a worker's memory (its workers are "
                       "spawned, not forked), so this test is worth no points here; Linux runs it"))
    if memory is not None or connection.memory_above is not None:  # into a bounded worker, or out of one
        connection.memory_above = int(float(memory.args[0]) * 2**20) if memory is not None else None
        fresh_worker(grading.impl())
    elif request.node.get_closest_marker("fresh_worker") or (
            request.node.get_closest_marker("warm_worker") and connection.process and not connection.worker_warm()):
        fresh_worker(grading.impl())
    budget = _budget(request.config)
    if budget is None or not budget.spent():  # a spent budget's test never runs: start no worker for it
        request.node.stash[_MARKS] = connection.output_marks()
    yield grading.impl()
    connection.call_timeout_s = None
    connection.release_all()


class _Reference:
    """The `ref` fixture: `ref.attention` is solutions/attention.py, imported in this trusted process."""

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in TEST_MODULES:
            return importlib.import_module(f"grader.inside.shared.{name}")
        return importlib.import_module(f"solutions.{name}")


@pytest.fixture(scope="session")
def ref() -> _Reference:
    if importlib.util.find_spec("solutions") is None:
        pytest.skip("these tests need the reference solutions, which this copy of the kit does not include")
    return _Reference()


@pytest.fixture(scope="session")
def device(grading: GradingSession) -> torch.device:
    return torch.device(grading.device)


@pytest.fixture(autouse=True)
def seed(request: pytest.FixtureRequest) -> int:
    """The test's seed, from the grading's and the test's id (grader.host.seeds): it seeds torch here, and the
    worker's with its first request, so a regrade of the same files draws the same inputs; it goes in the report."""
    prepared = _prepared(request.config)
    session = prepared.session if prepared is not None else request.config.stash.get(_SESSION, None)
    value = seeds.seed_of_test(session.seed if session is not None else 0, request.node.nodeid)
    manual_seed(value)
    if session is not None:
        session.connection.seed_pending = seeds.worker_seed(value)
    request.node.stash[_SEED] = value
    return value


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Once the run's time budget is spent, a test fails at once instead of running."""
    budget = _budget(pyfuncitem.config)
    if budget is None or not budget.spent():
        return None
    budget.used_up = True
    budget.tests_not_run += 1
    pytest.fail(tr("{reason}: this test was not run", reason=budget.message), pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("quick"):
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.skip(reason=tr(QUICK_SKIP)))
    # Tests that need a warm or a new worker run last. The sandbox warms up (about a second of fake tensors' imports,
    # see grader.inside.zygote) while the first worker runs the other tests: a worker forked then starts at once,
    # where the first one would pay that second itself, in the middle of the run. Reports keep the order collected.
    for order, item in enumerate(items):
        item.stash[_ORDER] = order
    items.sort(key=_run_order)
    # Only a run with such tests has the sandbox warm up: most have none, and a warm-up costs a core a second.
    config.stash[_WANTS_WARM] = any(item.get_closest_marker("warm_worker") for item in items)
    prepared = _prepared(config)
    if config.stash[_WANTS_WARM] and prepared is not None and prepared.session is not None:
        prepared.session.workers.want_warm()


def _run_order(item: pytest.Item) -> int:
    if item.get_closest_marker("memory_budget"):
        return 3  # its worker is bounded: no other test follows into it
    return 2 if item.get_closest_marker("fresh_worker") else 1 if item.get_closest_marker("warm_worker") else 0


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """Under the `grader` command, a failed test's report without pytest's traceback.

    The student sees the plugin's own message (`feedback`, attached as metadata); pytest would
    still build and filter a traceback for every failure, a fifth of the time a stub takes to
    grade, only for `--tb=no` to drop it. Skips, setup errors and plain pytest runs (the kit's
    developers read tracebacks) keep pytest's own report, and so does any other exception.
    """
    error = call.excinfo.value if call.excinfo is not None else None
    # AssertionError: a failed check, or SubmissionFailure (student code raised, crashed or is unfinished).
    if call.when != "call" or not isinstance(error, AssertionError) or _prepared(item.config) is None:
        return None
    if item.get_closest_marker("xfail"):
        return None
    summary = f"{type(error).__name__}: {error}"[:MAX_MESSAGE_CHARS]
    return pytest.TestReport(item.nodeid, item.location, {name: 1 for name in item.keywords}, "failed", summary,
                             "call", [], call.duration, call.start, call.stop, user_properties=item.user_properties)


def points_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("points")
    if item.get_closest_marker("real_device") and not _on_a_gpu(item.config):
        return 0.0
    if item.get_closest_marker("memory_budget") and not _bounds_memory(item.config):
        return 0.0
    return float(marker.args[0]) if marker else 1.0


def _bounds_memory(config: pytest.Config) -> bool:
    session = config.stash.get(_SESSION, None)
    return session is None or session.workers.sandbox.bounds_memory


def _on_a_gpu(config: pytest.Config) -> bool:
    session = config.stash.get(_SESSION, None)
    return session is not None and session.device == "cuda"


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> Metadata:
    metadata: Metadata = {}
    if call.when == "setup":
        metadata["exercise"] = exercise_of_test_file(Path(str(item.path)).name)
        metadata["points"] = points_of(item)
        metadata["suite"] = Path(str(item.path)).parent.name
        if confirmed_by := item.get_closest_marker("confirmed_by"):
            metadata["confirmed_by"] = list(confirmed_by.args)
        if hint_after := item.get_closest_marker("hint_after"):
            metadata["hint_after"] = list(hint_after.args)
        if item.config.getoption("quick") and item.get_closest_marker("slow"):
            metadata["counts_when_skipped"] = True  # a --quick run must not look like full marks
    if call.excinfo is not None:
        # What ties a failure here to what builds on it: read from the test's source for a test that went wrong only,
        # the only ones scoring asks about (about 0.3 s for the whole curriculum).
        metadata["contract_names"] = tested_names(item)
    if _SEED in item.stash:
        metadata["seed"] = item.stash[_SEED]
    if _ORDER in item.stash:
        metadata["order"] = item.stash[_ORDER]
    if call.excinfo is not None and not item.stash.get(_MESSAGE_SET, False):
        item.stash[_MESSAGE_SET] = True
        exercise = exercise_of_test_file(Path(str(item.path)).name)
        printed = _printed(item)  # before the diagnosis's own calls print anything
        diagnosis = _diagnosis(item, exercise, call.excinfo.value)
        message = feedback(call.excinfo.value, printed=printed, exercise=exercise, diagnosis=diagnosis)
        metadata["message"] = message
        if causes := causes_of(call.excinfo.value, exercise):
            metadata["causes"] = causes
        if markers.is_diagnosis(diagnosis) and exercise is not None:  # the failure that ran the diagnosis
            metadata["diagnosed"] = item.config.stash.get(_NAMED, {}).get(exercise, [])
        # A hint from what this failure measured (a known mistake, NaN seen, in either language) holds whatever
        # else fails.
        metadata["hint_measured"] = bool(diagnosis) or NAN_HINT in message or tr(NAN_HINT) in message
    return metadata


def _diagnosis(item: pytest.Item, exercise: str | None, error: BaseException) -> str:
    """The known mistake this failure comes from: "Diagnosis: ..." with the exercise's first failed test,
    then, for its later failures, the same finding as their hint ("Hint: ..."), in place of the hint
    the test gives for the symptom it saw."""
    session = item.config.stash.get(_SESSION, None)
    diagnosed = item.config.stash.setdefault(_DIAGNOSED, {})
    failed = item.config.stash.setdefault(_FAILED, set())
    if exercise is None or session is None or isinstance(error, pytest.skip.Exception):
        return ""
    failed.add(exercise)
    if isinstance(error, (NotImplementedYet, WorkerCrash, BudgetExhausted)):
        return ""  # unfinished or crashing code has no known mistake to name, and must not be run again
    if exercise in diagnosed:
        found = markers.diagnoses(diagnosed[exercise])
        return markers.hint(" ".join(found)) if found else ""
    budget = _budget(item.config)
    if budget is not None and budget.spent():
        return ""  # no time left to run the scenario; a later failure in this exercise will not try either
    diagnosed[exercise] = ""
    if failed.intersection(prerequisites(exercise)):
        return ""  # the failure may come from an exercise it builds on: naming a mistake here would mislead
    from grader.judge import diagnosis  # only a failure pays for it

    if diagnosis.mistakes_folder() is None:
        return ""  # the student release: no catalogue of mistakes
    connection = session.connection
    timeout = connection.call_timeout_s
    connection.call_timeout_s = DIAGNOSIS_CALL_TIMEOUT_S
    try:
        found = diagnosis.diagnose(exercise, session.impl(), device=session.device)
        diagnosed[exercise] = diagnosis.message(found)
        item.config.stash.setdefault(_NAMED, {})[exercise] = diagnosis.named(found)
    except Exception:  # a diagnosis is a bonus: the test's own message stands whatever happens here
        pass
    finally:
        connection.call_timeout_s = timeout
    return diagnosed[exercise]


def _printed(item: pytest.Item) -> str:
    session = item.config.stash.get(_SESSION, None)
    if session is None or _MARKS not in item.stash:
        return ""
    return session.connection.printed_since(item.stash[_MARKS])
