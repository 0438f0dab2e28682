"""`grader batch --cluster`: a class graded on a Dask cluster gets the grades a local batch gives it.

The clusters here are real: a scheduler and workers started with Dask's own commands (`dask scheduler`,
`dask worker`; with TLS, as docs/cluster.md starts them, or without it and --insecure-cluster), and the cluster
`--cluster local:2` starts. Workers are killed while they grade, and the scheduler while the batch runs: nothing
is lost, nothing is reported twice, and a rerun finishes the rest. Another user of the machine tries to use the
cluster of `local:2`, and runs nothing. The reference is `batch_reference` (conftest): the same class graded by
`grader batch --jobs 2`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from conftest import without_timings

distributed = pytest.importorskip("distributed", reason="the cluster extra (dask's distributed) is not installed")

REPO = Path(__file__).resolve().parents[2]
DASK = shutil.which("dask", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1",
       # A lost scheduler is given up on after this long, not Dask's 30 s.
       "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "4s"}


class DaskCluster:
    """A `dask scheduler` and `dask worker` processes on this machine, stopped at the end whatever happened; with TLS
    (`tls`), under a certificate of their own that a client shows through Dask's configuration (`client_config`)."""

    def __init__(self, folder: Path, *, environment: dict[str, str] | None = None, tls: bool = True) -> None:
        self.folder = folder
        self.environment = {**ENV, **(environment or {})}
        self.processes: list[subprocess.Popen] = []
        self.tls_options: list[str] = []
        self.client_config: dict[str, str] = {}
        if tls:  # one certificate, its own CA, for every role: what Security.temporary() makes, written to files
            made = distributed.security.Security.temporary()
            (folder / "cert.pem").write_text(made.tls_ca_file)
            (folder / "key.pem").write_text(made.tls_client_key)
            cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
            self.tls_options = ["--tls-ca-file", cert, "--tls-cert", cert, "--tls-key", key]
            self.client_config = {"distributed.comm.tls.ca-file": cert, "distributed.comm.tls.client.cert": cert,
                                  "distributed.comm.tls.client.key": key}
        scheduler_file = folder / "scheduler.json"
        self.scheduler = self._start([DASK, "scheduler", "--host", "tls://127.0.0.1" if tls else "127.0.0.1",
                                      "--port", "0", "--no-dashboard", *self.tls_options,
                                      "--scheduler-file", str(scheduler_file)], "scheduler")
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(scheduler_file.read_text())["address"]

    @property
    def client_environment(self) -> dict[str, str]:
        """`client_config` as the environment variables a `grader batch` reads it from."""
        return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): value
                for key, value in self.client_config.items()}

    def client(self) -> distributed.Client:
        """A client of the test's own (its certificate given, not read from Dask's configuration)."""
        if not self.client_config:
            return distributed.Client(self.address, timeout=30)
        cert, key = self.client_config["distributed.comm.tls.client.cert"], self.client_config[
            "distributed.comm.tls.client.key"]
        security = distributed.security.Security(tls_ca_file=cert, tls_client_cert=cert, tls_client_key=key,
                                                 require_encryption=True)
        return distributed.Client(self.address, timeout=30, security=security)

    def worker(self, name: str, *, nanny: bool = True, cwd: Path = REPO,
               environment: dict[str, str] | None = None) -> subprocess.Popen:
        command = [DASK, "worker", self.address, "--nthreads", "1", "--no-dashboard", "--name", name,
                   "--nanny" if nanny else "--no-nanny", *self.tls_options]
        return self._start(command, name, cwd=cwd, environment=environment)

    def wait_for_workers(self, count: int) -> None:
        with self.client() as client:
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
    """Starts a scheduler (`dask_cluster(environment=..., tls=...)`); every one started is stopped after the test."""
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

    def __init__(self, cluster: DaskCluster, times: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.left = dict(times)
        self.killed: list[tuple[str, str]] = []  # (submission id, worker address)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from grader.batch.cluster import STARTED

        try:
            with self.cluster.client() as client:
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
    import dask.config

    from grader.batch import schedule
    from grader.batch.plan import Plan
    from grader.grade.selection import select

    _, reference = batch_reference
    cluster = dask_cluster(environment={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})
    assert cluster.address.startswith("tls://"), cluster.address
    for name in ("w1", "w2"):
        cluster.worker(name)
    stranger = a_kit_that_differs(tmp_path / "other-kit")
    cluster.worker("stranger", cwd=stranger, environment={"PYTHONPATH": str(stranger)})
    cluster.wait_for_workers(3)
    killer = Killer(cluster, {"alice": 1, "bob": 10})
    killer.start()
    out = tmp_path / "grades"
    said: list[str] = []
    reported: list[str] = []
    try:
        with dask.config.set(cluster.client_config):  # the batch's certificate, where Dask's configuration says
            plan = Plan(out, select(None, "public"), "auto", 600, jobs=2, cluster=cluster.address)
            results = schedule.run(schedule.discover(batch_class), plan, say=said.append,
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
    # Each worker killed while grading is told of, in one line naming what it was grading.
    lost = [line for line in said if "was lost while grading" in line]
    assert [line for line in lost if "alice" in line] == [next(line for line in lost if "grading alice, which is "
                                                                "retried on another worker" in line)], said
    assert any("grading bob" in line and "recorded as a limit" in line for line in lost), said
    refusals = [line for line in said if "not grading on worker" in line]
    assert len(refusals) == 1 and "its kit differs" in refusals[0] and "install the same kit" in refusals[0], said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statuses"] == {"graded": 2, "refused": 1, "limit": 1, "grader-error": 0}, summary["statuses"]


def test_a_scheduler_gone_stops_the_batch_with_one_line_and_a_rerun_on_a_local_cluster_finishes_it(
        batch_class, batch_reference, dask_cluster, tmp_path):
    _, reference = batch_reference
    cluster = dask_cluster(tls=False)  # as on a private network: the batch uses it with --insecure-cluster
    cluster.worker("w1", nanny=False)
    cluster.wait_for_workers(1)
    out = tmp_path / "grades"
    command = [sys.executable, "-m", "grader", "batch", str(batch_class), "--out", str(out), "--suite", "public",
               "--cluster", cluster.address, "--insecure-cluster"]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    # mallory's refusal is written at once, by intake: wait for a report a worker graded.
    while len(list(out.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(cluster.scheduler.pid, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, (stdout, stderr)  # the user restarts it: not the grader's failure
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "went away" in lines[0] and "run the same command" in lines[0], stderr
    assert "its workers (they exit with it)" in lines[0], stderr
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


@pytest.mark.parametrize(("arguments", "says"), [
    (["local:0"], "local:N takes a number of workers from 1 to 256"),
    (["host:8786"], "is not a Dask scheduler's address"),
    (["tls://127.0.0.1:9"], "Dask's configuration has no TLS certificate for this client"),
    (["tcp://127.0.0.1:9", "--insecure-cluster"], "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
])
def test_a_cluster_that_cannot_be_used_is_a_one_line_usage_error(batch_class, tmp_path, arguments, says):
    run = batch(batch_class, tmp_path / "out", "--cluster", *arguments,
                env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"})
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, (run.stdout, run.stderr)
    assert says in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_a_scheduler_without_tls_is_refused_in_one_line_before_it_is_reached(batch_class, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        run = batch(batch_class, tmp_path / "out", "--cluster", address)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing connected to it
            listener.accept()
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, (run.stdout, run.stderr)
    line = run.stderr.strip()
    assert f"--cluster {address} lets anyone who can reach it run code on every worker" in line, line
    assert all(fix in line for fix in ("tls://", "docs/cluster.md#security", "--insecure-cluster")), line
    assert not (tmp_path / "out").exists()


def test_an_address_without_tls_needs_insecure_cluster_and_one_inside_a_process_is_no_address():
    from grader.batch.dask_client import ClusterError, parse

    for address in ("tcp://10.0.0.1:8786", "ws://10.0.0.1:8786", "ucx://10.0.0.1:8786"):
        with pytest.raises(ClusterError, match="--insecure-cluster"):
            parse(address)
        assert parse(address, insecure=True) == address
    for address in ("tls://10.0.0.1:8786", "wss://10.0.0.1:8786"):
        assert parse(address) == address
    for address in ("inproc://10.0.0.1/1/2", "http://10.0.0.1:8786", "tcp://"):
        with pytest.raises(ClusterError, match="is not a Dask scheduler's address"):
            parse(address, insecure=True)
    assert parse("local:2") == 2


# Run as uid 65534 against the scheduler of `local:2`: each way in, and a function that would leave a file where
# only the grader's user can write, if anything ran it.
INTRUDER = r"""
import os, ssl, sys
from distributed import Client
from distributed.security import Security

port, marker = sys.argv[1], sys.argv[2]
print("ready", flush=True)


def plant():
    with open(marker, "w") as file:
        file.write(str(os.getuid()))
    return os.getuid()


class NoCertificate(Security):
    # TLS that shows no certificate (and takes the scheduler's on trust): Dask's own Security always shows one.
    def get_connection_args(self, role):
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return {"ssl_context": context, "require_encryption": True, "extra_conn_args": {}}


for way, address, security in [("tcp", f"tcp://127.0.0.1:{port}", None),
                               ("tls without a certificate", f"tls://127.0.0.1:{port}", NoCertificate()),
                               ("tls with a certificate of its own", f"tls://127.0.0.1:{port}", Security.temporary())]:
    try:
        with Client(address, security=security, timeout=2) as client:
            print(f"{way}: ran as uid {client.submit(plant, pure=False).result(timeout=10)}")
    except Exception as error:
        print(f"{way}: refused ({type(error).__name__})")
"""


def listening() -> set[tuple[str, int]]:
    """The addresses this process and its descendants listen on for TCP connections (IPv4 and IPv6)."""
    found = set()
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {(c.laddr.ip, c.laddr.port) for c in process.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN}
    return found


def test_a_local_cluster_runs_nothing_for_another_user_and_listens_only_for_its_tls_comms(tmp_path):
    """`--cluster local:2` as the batch starts it: another user of the machine (uid 65534) who connects to its
    scheduler over plain TCP, over TLS without a certificate, or over TLS with a certificate of its own runs
    nothing there. Its scheduler, nannies and workers listen on 127.0.0.1 only, each on its Dask comm port with
    TLS, and nothing else listens: no dashboard, no HTTP server."""
    if os.geteuid() != 0:
        pytest.skip("running a process as uid 65534 needs root")
    pytest.importorskip("cryptography", reason="local:N makes its certificate with cryptography")
    from grader.batch.dask_client import connect

    before = listening()
    with connect("local:2") as client:
        client.wait_for_workers(2, timeout=60)
        info = client.scheduler_info(n_workers=-1)
        comms = [info["address"], *info["workers"], *(worker["nanny"] for worker in info["workers"].values())]
        opened = listening() - before
        marker = tmp_path / "planted"  # tmp_path is root's, 0700: only the grader's user could write this
        port = info["address"].rsplit(":", 1)[1]
        intruder = subprocess.run([sys.executable, "-c", INTRUDER, port, str(marker)], user=65534, group=65534,
                                  extra_groups=[], cwd="/", env={**ENV, "HOME": "/nonexistent"},
                                  capture_output=True, text=True, timeout=120)
    if intruder.returncode and "ready" not in intruder.stdout:
        pytest.skip(f"uid 65534 cannot run {sys.executable} with distributed (make the installation reachable, "
                    f"e.g. `chmod o+x /root`): {intruder.stderr.strip()[-300:]}")
    assert intruder.returncode == 0, intruder.stderr[-2000:]
    assert intruder.stdout.count("refused") == 3 and "ran as" not in intruder.stdout, intruder.stdout
    assert not marker.exists(), f"the cluster ran another user's function as uid {marker.read_text()}"
    assert all(comm.startswith("tls://127.0.0.1:") for comm in comms), comms
    assert len(comms) == 5 and opened == {("127.0.0.1", int(comm.rsplit(":", 1)[1])) for comm in comms}, (
        f"listening besides the TLS comms {comms}: {opened}")


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
    from grader.batch.jobs import Isolation

    monkeypatch.setenv("GRADER_WORKERS", "spawn")
    state = describe(["attention"], "public", "any fingerprint", Isolation(allow_unisolated=True))
    assert "GRADER_WORKERS=spawn" in state["problem"] and "Linux only" in state["problem"], state
    assert state["tier"] == "", state
