"""Fixtures for the kit's own tests: run the grader's command line and read its JSON report.

These tests know only the public contract (docs/contract.md: the command line, the exit codes, the JSON report):
the `grader check` command, its exit codes and the report it writes. The one exception is `warm_grader` (and
`tier_graders`, the same at each isolation tier), which grades many submissions through the warm slots
`grader batch` and `grader watch` run, for tests that only read reports.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader import lang
from grader.host import trees

REPO = Path(__file__).resolve().parents[2]
GRADE_TIMEOUT_S = 180.0

# A shell runs a background job with Ctrl-C ignored (`.ci/run ... &`), and an ignored signal stays ignored
# in every child: `grader watch` and `grader batch` would then never see the Ctrl-C the tests send them, as
# no user at a terminal would. The tests press Ctrl-C as a terminal does, so it must reach the children.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A student's progress lives in the user's state folder; the kit's tests keep theirs apart, one folder per
# working folder a command runs in (as `.grader/` in that folder once was), never in the real one.
STATE_ROOT = Path(tempfile.mkdtemp(prefix="kit-grader-state-"))
STATE_ROOT.chmod(0o777)  # the none tier's commands run as uid 65534
atexit.register(shutil.rmtree, STATE_ROOT, True)
os.environ["GRADER_STATE_DIR"] = str(STATE_ROOT / "in-process")


def state_for(cwd: Path) -> Path:
    """The state folder of the commands a test runs in `cwd`."""
    folder = STATE_ROOT / hashlib.sha256(str(Path(cwd).resolve()).encode()).hexdigest()[:16]
    folder.mkdir(exist_ok=True)
    folder.chmod(0o777)
    return folder


# The submissions are data, not tests; one of them carries a hostile conftest.py that must
# never be loaded into this session.
collect_ignore = ["submissions"]

OUTCOMES = {"passed", "failed", "error", "skipped"}
NUMBER = (int, float)
REPORT_FIELDS: dict[str, tuple[type, ...]] = {
    "schema": (str,), "submission": (str,), "suite": (str,), "device": (str,), "score": NUMBER,
    "max_score": NUMBER, "duration_s": NUMBER, "torch": (str,), "exercises": (list,),
}
EXERCISE_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "score": NUMBER, "max_score": NUMBER, "tests": (list,),
}
TEST_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,), "outcome": (str,), "points": NUMBER, "max_points": NUMBER, "message": (str,),
}


def _field_problems(where: str, obj: Any, fields: dict[str, tuple[type, ...]]) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where} is a {type(obj).__name__}, not an object"]
    problems = []
    for name, types in fields.items():
        if name not in obj:
            problems.append(f"{where} has no {name!r}")
        elif isinstance(obj[name], bool) or not isinstance(obj[name], types):
            problems.append(f"{where}[{name!r}] is {obj[name]!r}, not {'/'.join(t.__name__ for t in types)}")
    return problems


def report_problems(report: Any) -> list[str]:
    """Every way `report` departs from docs/contract.md#the-json-report; empty when it follows it."""
    problems = _field_problems("report", report, REPORT_FIELDS)
    if problems:
        return problems
    if report["schema"] != "grader-report/1":
        problems.append(f"schema is {report['schema']!r}, not 'grader-report/1'")
    for i, exercise in enumerate(report["exercises"]):
        where = f"exercises[{i}]"
        problems += _field_problems(where, exercise, EXERCISE_FIELDS)
        for j, test in enumerate(exercise.get("tests", []) if isinstance(exercise, dict) else []):
            problems += _field_problems(f"{where}.tests[{j}]", test, TEST_FIELDS)
            if isinstance(test, dict) and test.get("outcome") not in OUTCOMES:
                outcome = test.get("outcome")
                problems.append(f"{where}.tests[{j}] has outcome {outcome!r}, not one of {sorted(OUTCOMES)}")
    if not problems and abs(report["score"] - sum(e["score"] for e in report["exercises"])) > 1e-6:
        problems.append(f"score {report['score']} is not the sum of the exercise scores")
    return problems


def hidden_suite(exercise: str) -> Any:
    """tests/hidden/test_<exercise>.py as a module: a capstone's training settings and draws, as its test uses them."""
    import importlib.util

    path = REPO / "tests" / "hidden" / f"test_{exercise}.py"
    spec = importlib.util.spec_from_file_location(f"{exercise}_capstone_settings", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_variant(exercise: str) -> Any:
    """The reference solution of `exercise` as a Variant, beside its correct variants and known mistakes."""
    from grader.judge.variants import Variant

    source = (REPO / "solutions" / f"{exercise}.py").read_text(encoding="utf-8")
    return Variant(exercise=exercise, name="reference", source=source, diagnosis=None, origin=REPO / "solutions")


@pytest.fixture
def solution_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[Any, str, str], Any]:
    """`load(variant, module, name)`: `name` from the solutions' `module` (transformer), in a copy of the reference
    solutions with the variant's file swapped in (a decoder's mistake, say); imported here, in-process: for the
    capstones' styles."""
    import importlib

    from grader.judge import variants

    monkeypatch.syspath_prepend(str(tmp_path))

    def load(variant: Any, module: str, name: str) -> Any:
        package = tmp_path / f"capstone_{variant.exercise}_{variant.name}"
        package.mkdir()
        for solution in (REPO / "solutions").glob("*.py"):
            shutil.copyfile(solution, package / solution.name)
        variants.write(variant, package)
        return getattr(importlib.import_module(f"{package.name}.{module}"), name)

    return load


def without_timings(value: Any) -> Any:
    """A report (or any JSON value) with every `duration_s` and `seconds` left out: what two gradings of the same
    files must agree on."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("duration_s", "seconds")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


@dataclass
class Run:
    """One finished (or abandoned) call of the grader's command line."""

    args: list[str]
    returncode: int | None  # None when it ran past the time bound and was killed
    stdout: str
    stderr: str
    seconds: float
    report: Any = None  # the parsed --json file, when one was asked for and written

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def report_problems(self) -> list[str]:
        return report_problems(self.report)

    def exercise(self, exercise_id: str) -> dict[str, Any]:
        found = [e for e in self.report["exercises"] if e["id"] == exercise_id]
        assert len(found) == 1, f"report lists exercise {exercise_id!r} {len(found)} times"
        return found[0]

    def lost_tests(self, exercise_id: str) -> list[dict[str, Any]]:
        """The tests of the exercise that did not earn all their points."""
        return [t for t in self.exercise(exercise_id)["tests"] if t["points"] < t["max_points"]]

    def feedback(self, exercise_id: str) -> str:
        """What a student reads for the exercise: one 'name: message' line per test that lost points."""
        return "\n".join(f"{t['name']}: {t['message']}" for t in self.lost_tests(exercise_id))

    def describe(self) -> str:
        tail = (self.stderr or self.stdout)[-2000:]
        return f"`grader {' '.join(self.args)}` exit {self.returncode} after {self.seconds:.1f} s:\n{tail}"


def _environment() -> dict[str, str]:
    """Plain, wide output from this checkout's grader, whichever folder it runs in."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "COLUMNS": "160",
            "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


class GraderCLI:
    """The grader's command line, run from the repository root as an instructor would run it."""

    def run(self, *args: str, json_path: Path | None = None, timeout: float = GRADE_TIMEOUT_S,
            cwd: Path = REPO, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Run:
        """`python -m grader ARGS [--json JSON_PATH]`; a run past `timeout` is killed, not raised.

        `cwd` is where it runs (each working folder has a state folder of its own, `state_for`); the grader is this
        checkout's. `env` replaces the environment, `prefix` goes before the command (e.g. setpriv to another user).
        """
        argv = [*args, *(["--json", str(json_path)] if json_path else [])]
        env = dict(env or _environment())
        if env.get("GRADER_STATE_DIR") in (None, os.environ["GRADER_STATE_DIR"]):
            env["GRADER_STATE_DIR"] = str(state_for(cwd))
        start = time.monotonic()
        # Its own session, so that a grader stuck past the bound can be killed with all it started; adopted, so
        # that a worker this test process hosts never takes it for one of its escapees (grader.host.trees).
        with trees.starting():
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "grader", *argv], cwd=cwd, env=env, text=True,
                errors="replace", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,
            )
            trees.adopt(proc.pid)
        with proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
                returncode: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                returncode = None
        run = Run(argv, returncode, stdout, stderr, time.monotonic() - start)
        if json_path is not None and json_path.is_file():
            try:
                run.report = json.loads(json_path.read_text())
            except ValueError as error:
                run.report = f"unreadable JSON: {error}"
        return run

    def check(self, submission: Path, json_path: Path, exercise: str = "attention", *more: str) -> Run:
        """`grader check EXERCISE [MORE...] --submission SUBMISSION --json JSON_PATH`, without judging the result."""
        return self.run("check", exercise, *more, "--submission", str(submission), json_path=json_path)


@pytest.fixture(scope="session")
def grader_cli() -> GraderCLI:
    return GraderCLI()


@pytest.fixture(scope="session")
def grader_env() -> dict[str, str]:
    """The environment `grader_cli` runs the grader in, for tests that drive it by hand."""
    return _environment()


@pytest.fixture
def grade(grader_cli: GraderCLI, tmp_path: Path):
    """Grade one submission on `attention` and insist the run itself went by the contract.

    A file is graded as the submission's `attention.py`; a folder is graded as it is.
    """

    def _grade(submission: Path, exercise: str = "attention") -> Run:
        if submission.is_file():
            folder = tmp_path / "sub"
            folder.mkdir()
            shutil.copyfile(submission, folder / f"{exercise}.py")
            submission = folder
        run = grader_cli.check(submission, tmp_path / "report.json", exercise)
        assert run.returncode == 0, run.describe()
        assert run.report is not None, f"no report written to --json\n{run.describe()}"
        problems = run.report_problems()
        assert not problems, "report breaks the contract:\n" + "\n".join(problems)
        return run

    return _grade


# What bubblewrap prints where namespaces are refused (Docker's default seccomp profile, Gradescope).
FAILING_BWRAP = "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"
NOBODY = 65534


@pytest.fixture(scope="session")
def failing_bwrap() -> Iterator[Path]:
    """A `bwrap` that fails the way it does without namespaces, in a folder uid 65534 can reach."""
    folder = Path(tempfile.mkdtemp(prefix="kit-no-namespaces-"))
    folder.chmod(0o755)
    program = folder / "bwrap"
    program.write_text(FAILING_BWRAP)
    program.chmod(0o755)
    yield program
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def as_nobody() -> tuple[str, ...]:
    """The prefix that runs a command as uid/gid 65534 with no groups (`GraderCLI.run(prefix=...)`)."""
    return ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--")


WARM_SLOTS = 2  # one per core of the development machine and CI
WARM_BUDGET_S = 300.0  # `grader check --timeout`'s default


class WarmGrader:
    """Grades many submissions side by side in warm `grader batch` slots, each as `grader check EXERCISE ...
    --submission FOLDER` grades it: the same child process, sandbox, suites and report, without paying for torch's
    import and a sandbox's start-up every time (test_student_loop holds warm checks to what cold ones show).

    For tests that only read a submission's report; the command line itself is tested where it is the point.
    """

    def __init__(self, workdir: Path, slots: int = WARM_SLOTS, *, environment: Mapping[str, str] | None = None,
                 allow_unisolated: bool = False) -> None:
        """`environment` goes over this process's in every slot (GRADER_BWRAP, GRADER_LANDLOCK, GRADER_SANDBOX pick
        the tier); `allow_unisolated` is `--allow-unisolated`. GRADER_LANG and GRADER_SANDBOX reach the slots as
        `grader batch` sends them, in each job: read here, at this grader's edge."""
        from grader.batch.slot_process import Slot

        merged = {**os.environ, **(environment or {})}
        self._language = lang.choose(environ=merged)
        self._sandbox = merged.get("GRADER_SANDBOX", "auto") or "auto"

        self._workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)  # a slot's child writes its report into a folder that exists
        self._stage = Path(tempfile.mkdtemp(prefix="kit-warm-"))
        self._stage.chmod(0o711)  # crossed, never listed, by bubblewrap running as uid 65534
        self._allow_unisolated = allow_unisolated
        self._slots = [Slot("auto", self._stage, environment) for _ in range(slots)]
        self._count = 0

    def grade(self, requests: Sequence[tuple[Path, Sequence[str]]], *, quick: bool | Sequence[bool] = False,
              suite: str | None = None) -> list[Run]:
        """A Run per (submission folder, exercises), in order, graded WARM_SLOTS at a time; `quick` for all of them
        or one flag per request (`--quick`); `suite` is `--suite` (default: every suite installed)."""
        quicks = [quick] * len(requests) if isinstance(quick, bool) else list(quick)
        idle: queue.Queue[Any] = queue.Queue()
        for slot in self._slots:
            idle.put(slot)
        first = self._count
        self._count += len(requests)

        def one(numbered: tuple[int, tuple[Path, Sequence[str]]]) -> Run:
            from grader.batch.jobs import Isolation, Job, Status
            from grader.grade.selection import select
            from grader.host import tiers

            number, (submission, exercises) = numbered
            quick = quicks[number]
            selection = select(list(exercises), suite)
            report = self._workdir / f"warm-{first + number}.json"
            isolation = Isolation(protect=tiers.exposure(selection.suite) or "",
                                  allow_unisolated=self._allow_unisolated, sandbox=self._sandbox)
            job = Job(str(submission.resolve()), str(report), list(selection.exercises), selection.suite,
                      WARM_BUDGET_S + 30, isolation, quick=quick, budget_s=WARM_BUDGET_S, language=self._language)
            args = ["check", *exercises, "--submission", str(submission), *(["--quick"] if quick else []),
                    *(["--suite", suite] if suite else []), "(warm)"]
            slot = idle.get()
            started = time.monotonic()
            try:
                outcome = slot.grade(job, timeout_s=WARM_BUDGET_S + 60)
            finally:
                idle.put(slot)
            run = Run(args, 0 if outcome.status == Status.GRADED else 3, "", outcome.reason,
                      time.monotonic() - started)
            if report.is_file():
                run.report = json.loads(report.read_text())
            return run

        with ThreadPoolExecutor(len(self._slots)) as pool:
            return list(pool.map(one, enumerate(requests)))

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
        shutil.rmtree(self._stage, ignore_errors=True)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread for the test, as in the grader's worker (for tests that compute in this process; a module
    asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def warm_grader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmGrader]:
    grader = WarmGrader(tmp_path_factory.mktemp("warm"))
    yield grader
    grader.close()


class TierGraders:
    """Warm graders by isolation tier (`bubblewrap`, `user`, `none`), each started when a batch first needs it:
    `warm_grader` for bubblewrap, else slots whose processes meet the tier as a root grader without namespaces does
    (`environment`).

    A report names the tier that graded it (`sandbox`): a test at a tier checks it there, since a grader falls
    back to a weaker tier on its own.
    """

    def __init__(self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 failing_bwrap: Path) -> None:
        self._request = request
        self._tmp_path_factory = tmp_path_factory
        self._failing_bwrap = failing_bwrap
        self._started: dict[str, WarmGrader] = {}

    def problem(self, tier: str) -> str | None:
        """None when this machine can grade at `tier`, else why not."""
        from grader.host import tiers
        from grader.host.bubblewrap import bwrap_problem

        if tier == "bubblewrap":
            return bwrap_problem()
        if tier == "user":
            return tiers.user_problem()
        return None  # what every machine has left

    def environment(self, tier: str) -> dict[str, str]:
        """What a slot's environment needs to grade at `tier` below bubblewrap, as a root grader meets it.

        `user`: namespaces refused, as in Docker (a `bwrap` that fails as it does there). `none`: Landlock off as
        well, so that the user tier cannot prove the kit hidden from uid 65534 and `none` is what is left, which the
        operator accepts (`--allow-unisolated`). Where the kit is hidden from others anyway the user tier would
        hold: GRADER_SANDBOX=none is then the operator's choice of `none`.
        """
        environment = {"GRADER_BWRAP": str(self._failing_bwrap), "GRADER_SANDBOX": "auto"}
        if tier == "none":
            environment["GRADER_LANDLOCK"] = "off"
            if os.geteuid() == 0 and not REPO.stat().st_mode & 0o005:
                environment["GRADER_SANDBOX"] = "none"
        return environment

    def grade(self, requests: Mapping[str, Sequence[tuple[Path, Sequence[str]]]]) -> dict[str, list[Run]]:
        """A Run per request of each tier, in order: each tier's requests in one warm batch at that tier.

        Bubblewrap's batch goes first, in `warm_grader`'s slots; then the other tiers' batches side by side,
        sharing WARM_SLOTS, since a slot of each is what costs (torch imported, a sandbox started); a tier's
        slots are started with the first batch that needs them. A tier this machine cannot produce skips the test.
        """
        for tier in requests:
            if (problem := self.problem(tier)) is not None:
                pytest.skip(f"no {tier} tier here: {problem}")
        runs = {}
        if "bubblewrap" in requests:
            runs["bubblewrap"] = self._request.getfixturevalue("warm_grader").grade(requests["bubblewrap"])
        below = [tier for tier in requests if tier != "bubblewrap"]
        for tier in below:
            if tier not in self._started:
                self._started[tier] = WarmGrader(
                    self._tmp_path_factory.mktemp(f"warm-{tier}"), max(1, WARM_SLOTS // len(below)),
                    environment=self.environment(tier), allow_unisolated=tier == "none")
        with ThreadPoolExecutor(max(1, len(below))) as pool:
            batches = {tier: pool.submit(self._started[tier].grade, requests[tier]) for tier in below}
        runs.update((tier, batch.result()) for tier, batch in batches.items())
        return {tier: runs[tier] for tier in requests}

    def close(self) -> None:
        """Stop every tier's slots at once: each waits for its sandbox to be torn down."""
        with ThreadPoolExecutor(max(1, len(self._started))) as pool:
            list(pool.map(WarmGrader.close, self._started.values()))


@pytest.fixture(scope="session")
def tier_graders(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 failing_bwrap: Path) -> Iterator[TierGraders]:
    graders = TierGraders(request, tmp_path_factory, failing_bwrap)
    yield graders
    graders.close()


@pytest.fixture(scope="module")
def selected_params(request: pytest.FixtureRequest) -> Callable[[str], list[Any]]:
    """The values of a parameter over the tests of the requesting module this session runs (after -k, -x, ...),
    so that a module-scoped fixture grades all at once what will be read, and nothing else."""
    module = request.module.__name__

    def values(name: str) -> list[Any]:
        return [item.callspec.params[name] for item in request.session.items
                if getattr(item, "module", None) is not None and item.module.__name__ == module
                and hasattr(item, "callspec") and name in item.callspec.params]

    return values


@pytest.fixture(scope="session")
def gradescope() -> Iterator[Any]:
    """The Gradescope deployment (deploy.py): setup.sh run once per session, as root; each test then hands
    run_autograder a submission."""
    if os.geteuid() != 0:
        pytest.skip("Gradescope runs setup.sh and run_autograder as root")
    if not shutil.which("bwrap") or not shutil.which("setpriv"):
        pytest.skip("the rehearsal needs bubblewrap and setpriv (util-linux)")
    from deploy import deploy_gradescope

    yield from deploy_gradescope()



@pytest.fixture(scope="session")
def batch_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A class of four: alice the solutions (100), bob the stubs (0), carol a zip of one file, mallory an unsafe zip."""
    import zipfile

    folder = tmp_path_factory.mktemp("class")
    shutil.copytree(REPO / "solutions", folder / "alice")
    shutil.copytree(REPO / "exercises", folder / "bob")
    with zipfile.ZipFile(folder / "carol.zip", "w") as archive:
        archive.write(REPO / "solutions" / "attention.py", "carol-hw/attention.py")
    with zipfile.ZipFile(folder / "mallory.zip", "w") as archive:
        archive.writestr("../attention.py", "x = 1\n")
    return folder


@pytest.fixture(scope="session")
def batch_reference(batch_class: Path, tmp_path_factory: pytest.TempPathFactory):
    """`batch_class` graded by `grader batch --jobs 2` on the public suite: the run, and its DIR. Every other way of
    grading the class (a rerun, a cluster) must match it."""
    out = tmp_path_factory.mktemp("grades")
    command = [sys.executable, "-m", "grader", "batch", str(batch_class), "--out", str(out), "--suite", "public",
               "--jobs", "2"]
    run = subprocess.run(command, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"},
                         capture_output=True, text=True, timeout=600)
    return run, out
