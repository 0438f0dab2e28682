"""`grader batch --cluster`: a class graded on a Dask cluster gets the grades a local batch gives it.

The clusters here are real: a scheduler and workers started with Dask's own commands (`dask scheduler`,
`dask worker`), and a LocalCluster (`--cluster local:2`). Workers are killed while they grade, and the
scheduler while the batch runs: nothing is lost, nothing is reported twice, and a rerun finishes the rest.
The reference is `batch_reference` (conftest): the same class graded by `grader batch --jobs 2`.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="the cluster extra (dask's distributed) is not installed")

REPO = Path(__file__).resolve().parents[2]
DASK = shutil.which("dask", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1",
       # A lost scheduler is given up on after this long, not Dask's 30 s.
       "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "4s"}


class DaskCluster:
    """A `dask scheduler` and `dask worker` processes on this machine, stopped at the end whatever happened."""

    def __init__(self, folder: Path, *, environment: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.environment = {**ENV, **(environment or {})}
        self.processes: list[subprocess.Popen] = []
        scheduler_file = folder / "scheduler.json"
        self.scheduler = self._start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                      "--scheduler-file", str(scheduler_file)], "scheduler")
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(scheduler_file.read_text())["address"]

    def worker(self, name: str, *, nanny: bool = True, cwd: Path = REPO,
               environment: dict[str, str] | None = None) -> subprocess.Popen:
        command = [DASK, "worker", self.address, "--nthreads", "1", "--no-dashboard", "--name", name,
                   "--nanny" if nanny else "--no-nanny"]
        return self._start(command, name, cwd=cwd, environment=environment)

    def wait_for_workers(self, count: int) -> None:
        with distributed.Client(self.address, timeout=30) as client:
            client.wait_for_workers(count, timeout=60)

    def _start(self, command: list[str], name: str, *, cwd: Path = REPO,
               environment: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("w")
        process = subprocess.Popen(command, cwd=cwd, env={**self.environment, **(environment or {})}, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[Callable[..., DaskCluster]]:
    """Starts a scheduler (`dask_cluster(environment=...)`); every one started is stopped after the test."""
    started: list[DaskCluster] = []

    def start(**options) -> DaskCluster:
        folder = tmp_path / f"cluster-{len(started)}"
        folder.mkdir()
        started.append(DaskCluster(folder, **options))
        return started[-1]

    yield start
    for cluster in started:
        cluster.stop()


def graded(out: Path) -> dict[str, object]:
    """Each report of DIR as a local batch and a cluster must agree on it: everything but the timings."""
    def without_timings(value):
        if isinstance(value, dict):
            return {k: without_timings(v) for k, v in value.items() if k not in ("duration_s", "seconds")}
        if isinstance(value, list):
            return [without_timings(v) for v in value]
        return value

    return {path.stem: without_timings(json.loads(path.read_text())) for path in sorted(out.glob("*.json"))
            if path.stem != "summary"}


def rows(out: Path) -> dict[str, dict[str, str]]:
    return {row["id"]: row for row in csv.DictReader((out / "grades.csv").open())}


def batch(folder: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--suite", "public", *extra]
    return subprocess.run(command, cwd=REPO, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=600)


def a_kit_that_differs(folder: Path) -> Path:
    """A copy of the kit whose public suite has one more line: a worker running it must be refused."""
    for name in ("grader", "solutions", "tests", "exercises"):
        shutil.copytree(REPO / name, folder / name, ignore=shutil.ignore_patterns("__pycache__", "submissions"))
    with (folder / "tests" / "public" / "test_attention.py").open("a") as suite:
        suite.write("\n# another version of the suite\n")
    return folder


class Killer(threading.Thread):
    """SIGKILLs the worker grading a submission as soon as it starts grading it (the batch's STARTED event, on
    the scheduler), `times` times for each submission id given."""

    def __init__(self, address: str, times: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.address = address
        self.left = dict(times)
        self.killed: list[tuple[str, str]] = []  # (submission id, worker address)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from grader.batch.cluster import STARTED

        try:
            with distributed.Client(self.address, timeout=30) as client:
                seen = 0
                while not self.done.is_set() and any(self.left.values()):
                    events = client.get_events(STARTED)
                    for _, event in events[seen:]:
                        if self.left.get(event["submission"]):
                            pid = client.run(os.getpid, workers=[event["worker"]])[event["worker"]]
                            os.kill(pid, signal.SIGKILL)
                            self.left[event["submission"]] -= 1
                            self.killed.append((event["submission"], event["worker"]))
                    seen = len(events)
                    time.sleep(0.02)
        except BaseException as error:
            self.error = error


def test_workers_killed_while_grading_lose_nothing_and_a_worker_with_another_kit_is_refused(
        batch_class, batch_reference, dask_cluster, tmp_path):
    """alice's worker dies once while grading her: she is graded again elsewhere, once, even where the next worker
    to hold her dies too (killed grading bob) before it starts on her. bob's worker dies each time it grades him:
    he is recorded as a limit, not retried forever. The scheduler here fails a task once 2 workers died holding
    it, grading it or not; the batch counts only the workers that died grading it. A worker running another kit
    never grades anyone, and the batch says so in one line."""
    from grader.batch import schedule
    from grader.grade.selection import select

    _, reference = batch_reference
    cluster = dask_cluster(environment={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})
    for name in ("w1", "w2"):
        cluster.worker(name)
    stranger = a_kit_that_differs(tmp_path / "other-kit")
    cluster.worker("stranger", cwd=stranger, environment={"PYTHONPATH": str(stranger)})
    cluster.wait_for_workers(3)
    killer = Killer(cluster.address, {"alice": 1, "bob": 10})
    killer.start()
    out = tmp_path / "grades"
    said: list[str] = []
    reported: list[str] = []
    try:
        results = schedule.run(schedule.discover(batch_class), out, select(None, "public"), jobs=2, timeout_s=600,
                               device="auto", cluster=cluster.address, say=said.append,
                               on_result=lambda result: reported.append(result.id))
    finally:
        killer.done.set()
        killer.join(timeout=30)
    assert killer.error is None, repr(killer.error)
    killed = [submission for submission, _ in killer.killed]
    assert killed.count("alice") == 1 and 2 <= killed.count("bob") <= 10, killed
    assert sorted(reported) == ["alice", "bob", "carol", "mallory"], reported  # each once
    assert {r.id: r.status for r in results}["bob"] == "timeout"
    assert rows(out)["bob"]["status"] == "limit" and float(rows(out)["bob"]["total"]) == 0, rows(out)["bob"]
    bob = json.loads((out / "bob.json").read_text())
    assert re.search(f"ended the Dask worker grading it {killed.count('bob')} times", bob["warnings"][0]), bob
    expected, got = graded(reference), graded(out)
    for submission in ("alice", "carol", "mallory"):
        assert got[submission] == expected[submission], submission
    refusals = [line for line in said if "not grading on worker" in line]
    assert len(refusals) == 1 and "its kit differs" in refusals[0] and "install the same kit" in refusals[0], said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statuses"] == {"graded": 2, "refused": 1, "limit": 1, "grader-error": 0}, summary["statuses"]


def test_a_scheduler_gone_stops_the_batch_with_one_line_and_a_rerun_on_a_local_cluster_finishes_it(
        batch_class, batch_reference, dask_cluster, tmp_path):
    _, reference = batch_reference
    cluster = dask_cluster()
    cluster.worker("w1", nanny=False)
    cluster.wait_for_workers(1)
    out = tmp_path / "grades"
    command = [sys.executable, "-m", "grader", "batch", str(batch_class), "--out", str(out), "--suite", "public",
               "--cluster", cluster.address]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    # mallory's refusal is written at once, by intake: wait for a report a worker graded.
    while len(list(out.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(cluster.scheduler.pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "went away" in lines[0] and "run the same command" in lines[0], stderr
    kept = sorted(path.stem for path in out.glob("*.json"))
    assert 2 <= len(kept) < 4, kept
    assert all(graded(out)[name] == graded(reference)[name] for name in kept)

    rerun = batch(batch_class, out, "--cluster", "local:2")
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(kept)} of 4 submissions were graded by an earlier run" in rerun.stderr, rerun.stderr
    assert graded(out) == graded(reference)
    assert (out / "grades.csv").read_text() == (reference / "grades.csv").read_text()
    assert json.loads((out / "summary.json").read_text()) == json.loads((reference / "summary.json").read_text())
    assert not list(out.glob(".partial-*"))


@pytest.mark.parametrize(("address", "says"), [
    ("local:0", "local:N takes a number of workers from 1 to 256"),
    ("host:8786", "is not a Dask scheduler's address"),
    ("tcp://127.0.0.1:9", "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
])
def test_a_cluster_that_cannot_be_used_is_a_one_line_usage_error(batch_class, tmp_path, address, says):
    run = batch(batch_class, tmp_path / "out", "--cluster", address,
                env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"})
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, (run.stdout, run.stderr)
    assert says in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_without_the_cluster_extra_cluster_says_what_to_install(batch_class, tmp_path):
    # As where `pip install attention-kit` was run without [cluster]: `import distributed` fails.
    without = "import sys; sys.modules['distributed'] = None; from grader.cli import run; sys.exit(run())"
    command = [sys.executable, "-c", without, "batch", str(batch_class), "--out", str(tmp_path / "out"),
               "--cluster", "local:2"]
    run = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert 'pip install "attention-kit[cluster]"' in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def test_a_worker_that_spawns_its_workers_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch):
    """A Dask worker on macOS or Windows (or with GRADER_WORKERS=spawn) has no zygote for its slots: it offers no
    slot and says why, as a worker with another kit does (what `describe` answers is what the batch prints)."""
    pytest.importorskip("distributed")
    from grader.batch.dask_worker import describe

    monkeypatch.setenv("GRADER_WORKERS", "spawn")
    state = describe(["attention"], "public", "any fingerprint", "", True)
    assert "GRADER_WORKERS=spawn" in state["problem"] and "Linux only" in state["problem"], state
    assert state["tier"] == "", state
