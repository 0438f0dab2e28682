"""Isolation: submissions that attack the sandbox itself must fail, alone, in a batch, and as an unprivileged user.

These are the acceptance tests of the bubblewrap tier (docs/contract.md#the-json-report, its `sandbox`:
namespaces, no capabilities, an unprivileged uid). Each submission under submissions/isolation/ attacks at call time
(remounts and plants code in the Python installation, reads or traces the zygote, stops or kills it,
leaves lurking processes, fills the scratch space, forks or starts threads without end, opens network
connections) and holds no working `attention`: any score above 0 means its attack worked. In a batch,
each one is followed in the same sandbox by an innocent classmate, who must get the score it gets alone.

Like the other kit tests they only look from the outside: the command's exit status and reports,
the processes alive on the host afterwards (anything whose command line names the worker package
`gradeworker` or carries the marker), the files on the host (anything named with, or planted holding,
KIT_ISOLATION_MARKER; found ones are removed and planted ones undone), and listeners on the host's
loopback and Unix sockets. What an attack says of itself in its error message is a diagnostic, used
as evidence only where nothing outside can tell (the zygote's memory, the sandbox's own tmpfs, forks).
Each grading runs with TMPDIR set to a folder of its own, so that the staging folders it leaves
(grader-*, in /tmp by default) are told apart from those of other gradings on the same machine.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ISOLATION = HERE / "submissions" / "isolation"
NAMES = sorted(p.name for p in ISOLATION.iterdir() if (p / "attention.py").is_file())
INNOCENT = sorted((HERE / "submissions" / "attention" / "correct").glob("*.py"))[0]
MARKER = "KIT_ISOLATION_MARKER"
SANDBOX_SIGNS = (b"gradeworker", MARKER.encode())  # in the command line of every process a sandbox runs
LEFTOVER_GRACE_S = 3.0
SCRATCH_CAP_BYTES = 256 * 2**20  # /tmp and /dev/shm together (GRADER_SCRATCH_MB)
SCRATCH_FILES = 65536
MAX_FORKS = 64
BATCH_TIMEOUT_S = 900.0
NOBODY = 65534
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can make a sandbox here (the tier these guarantees are for), else why not."""
    path = shutil.which("bwrap")
    if path is None:
        return "bubblewrap (bwrap) is not installed"
    probe = subprocess.run([path, "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, text=True,
                           timeout=60)
    if probe.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()[-300:]}"
    return None


# Slow by nature: every attack graded alone, then in batches, root and unprivileged (over a minute).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bwrap_problem() is not None,
                                                  reason=f"isolation is the bubblewrap tier's: {bwrap_problem()}")]


# --- processes left behind ------------------------------------------------------------------------------------

def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, None when it is gone."""
    data = _read(f"/proc/{pid}/stat")
    try:
        fields = data.rsplit(b")", 1)[1].split()  # type: ignore[union-attr]
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (AttributeError, IndexError, ValueError):
        return None


def _sandbox_processes() -> set[tuple[int, int]]:
    """(pid, start time) of every live process that a sandbox runs (the zygote, its workers, what they started)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        command, stat = _read(f"/proc/{entry}/cmdline"), _stat(int(entry))
        if command and stat and stat[0] != "Z" and any(sign in command for sign in SANDBOX_SIGNS):
            found.add((int(entry), stat[2]))
    return found


def _ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1 and len(chain) < 200 and (stat := _stat(pid)) is not None:
        pid = stat[1]
        chain.append(pid)
    return chain


def _token_holders(token: bytes) -> set[int]:
    """Pids of live processes (never this one) whose environment holds `token`."""
    holders = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and token in (_read(f"/proc/{entry}/environ") or b""):
            stat = _stat(int(entry))
            if stat and stat[0] != "Z":
                holders.add(int(entry))
    return holders


def _graded_by_someone_else(pid: int, token: bytes) -> bool:
    """Whether a live trusted grader (or pytest) not started by this test is above `pid`: its sandbox is not ours.

    Keeps these checks off the sandboxes of other gradings running on the same machine at the same time.
    """
    mine = {os.getpid(), *_ancestors(os.getpid())}
    for ancestor in _ancestors(pid):
        if ancestor in mine or token in (_read(f"/proc/{ancestor}/environ") or b""):
            return False
        command = _read(f"/proc/{ancestor}/cmdline") or b""
        if not any(sign in command for sign in SANDBOX_SIGNS) and (b"grader" in command or b"pytest" in command):
            return True
    return False


_TMPDIRS: list[Path] = []  # the gradings' own TMPDIRs, removed when the module's tests are done


@pytest.fixture(scope="module", autouse=True)
def _remove_tmpdirs() -> Iterator[None]:
    yield
    for folder in _TMPDIRS:
        shutil.rmtree(folder, ignore_errors=True)


class Aftermath:
    """What one grading, run with `env`, leaves behind on the host: processes, and files in its TMPDIR.

    `env` holds a token that marks the trusted processes the grading starts (a batch's slots among
    them); a sandbox's own processes get a scrubbed environment, so they are found by their command
    line instead, and told from other gradings' by the trusted processes above them. `env` also points
    TMPDIR at a folder of the grading's own, where the grader stages submissions (grader-*, in /tmp by
    default): what it leaves there is its own, whatever other gradings do on the machine meanwhile.
    """

    def __init__(self, workdir: Path) -> None:
        self.before = _sandbox_processes()
        value = f"{os.getpid()}-{time.monotonic_ns()}"
        self.token = f"KIT_ISOLATION_RUN={value}".encode()
        # Not under workdir: bubblewrap runs as uid 65534 when the grader is root, and must cross every
        # folder above its stage (pytest's tmp_path sits in a private folder).
        self.tmpdir = Path(tempfile.mkdtemp(prefix="kit-isolation-tmp-"))
        self.tmpdir.chmod(0o1777)
        _TMPDIRS.append(self.tmpdir)
        self.env = {"KIT_ISOLATION_RUN": value, "TMPDIR": str(self.tmpdir)}

    def _new(self) -> list[int]:
        sandboxes = {pid for pid, _ in _sandbox_processes() - self.before
                     if not _graded_by_someone_else(pid, self.token)}
        return sorted(sandboxes | _token_holders(self.token))

    def processes(self, grace_s: float = LEFTOVER_GRACE_S) -> list[str]:
        """Waits up to `grace_s` for them to go, then kills and describes those still there."""
        deadline = time.monotonic() + grace_s
        while (pids := self._new()) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = []
        for pid in pids:
            command = (_read(f"/proc/{pid}/cmdline") or b"").replace(b"\0", b" ").decode(errors="replace")
            stat = _stat(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                survivors.append(f"pid {pid} (state {stat[0] if stat else '?'}): {command.strip()[:200]}")
        return survivors

    def files(self, grace_s: float = LEFTOVER_GRACE_S) -> list[str]:
        """The grader's folders (grader-*: staged submissions, scratch) still in its TMPDIR after up to `grace_s`.

        Other entries are not the grader's (torch keeps its caches there, for one).
        """
        deadline = time.monotonic() + grace_s
        while (left := sorted(p.name for p in self.tmpdir.glob("grader-*"))) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [f"{self.tmpdir}/{name}" for name in left]


# --- files left or planted on the host ---------------------------------------------------------------------

def _python_folders() -> list[Path]:
    """Where Python looks for code at start-up on the host: sys.path, site-packages, torch, the prefixes."""
    import torch

    folders = [*sys.path, *site.getsitepackages(), site.getusersitepackages(), os.path.dirname(torch.__file__),
               os.path.dirname(os.__file__), sys.prefix, sys.base_prefix]
    return [Path(p) for p in dict.fromkeys(folders) if p and os.path.isdir(p)]


def _planted_targets() -> list[Path]:
    """Files the Python installation may already hold that an attack would add code to."""
    import torch

    folders = dict.fromkeys([*site.getsitepackages(), site.getusersitepackages(), os.path.dirname(os.__file__),
                             *sys.path])
    paths = [Path(folder) / name for folder in folders if folder for name in ("sitecustomize.py", "usercustomize.py")]
    return [*paths, Path(torch.__file__)]


def marker_paths(*homes: Path) -> list[Path]:
    """Every file or folder on the host named with the marker, where a sandbox could have written it."""
    deep = [Path("/tmp"), Path("/dev/shm"), REPO, *homes]
    flat = [Path("/"), Path("/dev"), Path("/usr"), Path("/usr/local"), Path.home(), *_python_folders()]
    found: dict[Path, None] = {}
    for root in deep:
        for folder, folders, files in os.walk(root):
            found.update((Path(folder) / name, None) for name in [*folders, *files] if MARKER in name)
            folders[:] = [name for name in folders if name != ".git" and MARKER not in name]
    for folder in flat:
        with contextlib.suppress(OSError):
            found.update((folder / name, None) for name in os.listdir(folder) if MARKER in name)
    return list(found)


class HostFiles:
    """Snapshots the files an attack would plant code in; `changes()` names what changed and undoes it."""

    def __init__(self, *homes: Path) -> None:
        self.homes = homes
        self.saved = {path: _read(str(path)) for path in _planted_targets()}

    def changes(self) -> list[str]:
        changes = []
        for path, before in self.saved.items():
            now = _read(str(path))
            if now != before:
                changes.append(f"{path} {'created' if before is None else 'modified'}")
                if before is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(before)
        for path in marker_paths(*self.homes):
            changes.append(f"{path} written")
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        return changes


# --- the host's listeners for the network attack -----------------------------------------------------------

class Listeners:
    """A TCP port on 127.0.0.1, an abstract Unix socket and a Unix socket file in /tmp, all listening."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind(f"\0kit-isolation-{self.port}")
        self.path = Path(f"/tmp/kit-isolation-{self.port}.sock")
        self.file = socket.socket(socket.AF_UNIX)
        self.file.bind(str(self.path))
        self.path.chmod(0o777)
        self.sockets = {"127.0.0.1 TCP": self.tcp, "abstract Unix": self.abstract, f"{self.path}": self.file}
        for sock in self.sockets.values():
            sock.listen(16)
            sock.setblocking(False)

    def reached(self) -> list[str]:
        """Which listeners a connection reached since the last call (each is accepted and closed)."""
        reached = []
        for name, sock in self.sockets.items():
            with contextlib.suppress(BlockingIOError):
                while True:
                    sock.accept()[0].close()
                    reached.append(name)
        return sorted(set(reached))

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def listeners() -> Iterator[Listeners]:
    listening = Listeners()
    yield listening
    listening.close()


def stage_hostile(name: str, into: Path, listening: Listeners) -> Path:
    """A copy of the isolation submission `name` (the network attack aimed at `listening`)."""
    shutil.copytree(ISOLATION / name, into)
    source = into / "attention.py"
    text = source.read_text()
    if "TCP_PORT = 0" in text:
        source.write_text(text.replace("TCP_PORT = 0", f"TCP_PORT = {listening.port}", 1))
    return into


def stage_innocent(into: Path) -> Path:
    """A classmate's folder holding a correct `attention.py` (a variant from submissions/attention/correct)."""
    into.mkdir(parents=True)
    shutil.copyfile(INNOCENT, into / "attention.py")
    return into


# --- running the grader ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kit(grader_cli) -> Any:
    """The kit tests' conftest module: its `Run` and `report_problems`."""
    return sys.modules[type(grader_cli).__module__]


def run_grader(kit: Any, args: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float = 300.0,
               prefix: tuple[str, ...] = (), json_path: Path | None = None) -> Any:
    """`[PREFIX] python -m grader ARGS [--json JSON_PATH]`, as the conftest's `Run` (None: killed past `timeout_s`)."""
    return kit.GraderCLI().run(*args, json_path=json_path, timeout=timeout_s, cwd=cwd, env=env, prefix=prefix)


def attention_messages(report: Any) -> str:
    """Every message of the report's attention tests: where an attack's error message ends up."""
    if not isinstance(report, dict):
        return ""
    return "\n".join(t.get("message", "") for e in report.get("exercises", []) if e.get("id") == "attention"
                     for t in e.get("tests", []))


def attention_score(report: Any) -> float | None:
    if not isinstance(report, dict):
        return None
    return next((e.get("score") for e in report.get("exercises", []) if e.get("id") == "attention"), None)


def claimed(pattern: str, report: Any) -> list[str]:
    """What an attack says it achieved, from `pattern`'s first group in its messages (e.g. `opened=[...]`)."""
    return re.findall(pattern, attention_messages(report))


@dataclass
class Graded:
    """One isolation submission graded alone with `grader check`, and what it left on the host."""

    name: str
    run: Any
    leftovers: list[str]
    host_changes: list[str]
    reached: list[str]
    stubs_run: Any = None  # remount_and_plant: the kit's stubs graded right after, with planted code armed

    def describe(self) -> str:
        messages = attention_messages(self.run.report)
        return f"{self.name}: {self.run.describe()}\nattention messages:\n{messages[-1500:]}"


@pytest.fixture(scope="module")
def graded_alone(kit, grader_env, listeners, tmp_path_factory) -> Callable[[str], Graded]:
    """Grades an isolation submission alone (once per module) on `attention` and inspects the host after it."""
    done: dict[str, Graded] = {}

    def grade(name: str) -> Graded:
        if name in done:
            return done[name]
        workdir = tmp_path_factory.mktemp(name)
        submission = stage_hostile(name, workdir / "submission", listeners)
        after, host = Aftermath(workdir), HostFiles()
        env = {**grader_env, **after.env}
        listeners.reached()
        try:
            run = run_grader(kit, ["check", "attention", "--suite", "public", "--submission", str(submission)],
                             env=env, cwd=workdir, json_path=workdir / "report.json")
            leftovers = after.processes()
            stubs_run = None
            if name == "remount_and_plant":
                # A trusted grader started afterwards must run nothing the attack planted: armed by this
                # variable, planted code leaves /tmp/KIT_ISOLATION_MARKER-planted-* behind. The stubs score 0.
                stubs_run = run_grader(kit, ["check", "attention", "--suite", "public", "--submission",
                                             str(REPO / "exercises")], env={**env, "KIT_ISOLATION_ARMED": "1"},
                                       cwd=workdir, json_path=workdir / "stubs.json")
                leftovers += after.processes()
            files_left = after.files()
        finally:
            changes = host.changes()  # also undoes them
        done[name] = Graded(name, run, leftovers, [*changes, *(f"{f} left" for f in files_left)],
                            listeners.reached(), stubs_run)
        return done[name]

    return grade


# --- (a) each attack, graded alone -------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_grading_completes_with_a_report_by_the_contract(graded_alone, name):
    graded = graded_alone(name)
    run = graded.run
    assert not run.timed_out, graded.describe()
    assert run.returncode == 0, graded.describe()
    assert run.report is not None, f"no report written\n{graded.describe()}"
    problems = run.report_problems()
    assert not problems, "report breaks the contract:\n" + "\n".join(problems)
    assert run.report.get("sandbox", "bubblewrap") == "bubblewrap", (
        f"graded under sandbox {run.report.get('sandbox')!r} although bubblewrap works here\n{graded.describe()}")


@pytest.mark.parametrize("name", NAMES)
def test_attack_scores_zero(graded_alone, name):
    graded = graded_alone(name)
    score = attention_score(graded.run.report)
    assert score == 0, f"{name} scored {score} on attention: its attack worked\n{graded.describe()}"


@pytest.mark.parametrize("name", NAMES)
def test_no_process_outlives_grading(graded_alone, name):
    graded = graded_alone(name)
    assert not graded.leftovers, ("still alive after grading (now killed):\n" + "\n".join(graded.leftovers)
                                  + f"\n{graded.describe()}")


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_written_or_planted_on_the_host(graded_alone, name):
    graded = graded_alone(name)
    assert not graded.host_changes, ("found on the host after grading (now removed or undone):\n"
                                     + "\n".join(graded.host_changes) + f"\n{graded.describe()}")


def test_planted_code_never_runs_in_the_grader(graded_alone):
    graded = graded_alone("remount_and_plant")
    stubs = graded.stubs_run
    assert stubs is not None and stubs.returncode == 0 and stubs.report is not None, stubs and stubs.describe()
    assert attention_score(stubs.report) == 0, f"the kit's stubs scored {attention_score(stubs.report)}\n" \
                                               f"{stubs.describe()}"
    ran = [change for change in graded.host_changes if "-planted-" in change]
    assert not ran, "code planted by the submission ran in the trusted grader:\n" + "\n".join(ran)


def assert_claims_nothing(graded: Graded, name: str, what: str) -> None:
    """The attack's own list `name=[...]` of what it got is empty (evidence where nothing outside can tell)."""
    got = [claim for claim in claimed(name + r"=\[([^\]]*)\]", graded.run.report) if claim.strip()]
    assert not got, f"{what}: {sorted(set(got))}\n{graded.describe()}"


def test_the_zygote_cannot_be_read_traced_or_robbed(graded_alone):
    assert_claims_nothing(graded_alone("zygote_memory"), "opened", "the worker got into its zygote")


def test_the_zygote_cannot_be_signalled(graded_alone):
    assert_claims_nothing(graded_alone("signal_zygote"), "signalled", "the worker signalled")


def test_scratch_space_is_capped(graded_alone):
    graded = graded_alone("fill_scratch")
    wrote = [int(n) for n in claimed(r"wrote (\d+) bytes", graded.run.report)]
    assert wrote, f"the attack never said how much it wrote\n{graded.describe()}"
    assert max(wrote) <= SCRATCH_CAP_BYTES + 2**20, (
        f"wrote {max(wrote) / 2**20:.0f} MiB to /tmp and /dev/shm, over the {SCRATCH_CAP_BYTES // 2**20} MiB cap\n"
        f"{graded.describe()}")


def test_scratch_file_count_is_capped(graded_alone):
    graded = graded_alone("many_files")
    made = [int(n) for n in claimed(r"made (\d+) files", graded.run.report)]
    # The grader looks twice a second: a worker may pass the 65536 files by what it makes in that time.
    assert max(made, default=0) <= 2 * SCRATCH_FILES, (
        f"a worker made {max(made)} files in the scratch space (at most {SCRATCH_FILES} allowed)\n{graded.describe()}")


def test_process_count_is_capped(graded_alone):
    graded = graded_alone("fork_count")
    forked = [int(n) for n in claimed(r"forked (\d+)", graded.run.report)]
    assert max(forked, default=0) <= MAX_FORKS, (
        f"a worker forked {max(forked)} processes (at most {MAX_FORKS} allowed)\n{graded.describe()}")


def test_no_network_reaches_out(graded_alone):
    graded = graded_alone("network")
    assert not graded.reached, f"the sandbox connected to the host's {graded.reached}\n{graded.describe()}"
    assert_claims_nothing(graded, "connected", "the sandbox connected to")


def test_the_kernels_settings_stay_out_of_reach(graded_alone):
    assert_claims_nothing(graded_alone("kernel_settings"), "writable", "the worker could open for writing")


def test_memory_the_data_limit_misses_is_refused(graded_alone):
    assert_claims_nothing(graded_alone("uncounted_memory"), "held", "the worker held memory no limit counts")


def test_a_worker_that_stops_reading_cannot_stall_grading_past_its_budget(grader_cli, tmp_path):
    submission = tmp_path / "submission"
    shutil.copytree(ISOLATION / "stalled_pipe", submission)
    run = grader_cli.run("check", "attention", "--suite", "public", "--submission", str(submission), "--timeout", "15",
                         json_path=tmp_path / "report.json", timeout=90)
    assert run.returncode == 0 and run.seconds < 60, run.describe()
    assert attention_score(run.report) == 0


# --- (b) each attack followed by an innocent classmate, in one batch --------------------------------------

def hostile_id(index: int, name: str) -> str:
    return f"{index:02d}-a-{name}"


def innocent_id(index: int) -> str:
    return f"{index:02d}-b-innocent"


@dataclass
class Batch:
    run: Any
    reports: dict[str, Any]  # id -> the parsed OUT/<id>.json (None when missing or unreadable)
    leftovers: list[str]
    host_changes: list[str]
    files_left: list[str]  # in the grader's TMPDIR
    reached: list[str]

    def describe(self, entry: str | None = None) -> str:
        text = self.run.describe()
        if entry is not None:
            report = self.reports.get(entry)
            status = report.get("status") if isinstance(report, dict) else None
            text += f"\n{entry} (status {status}) attention messages:\n{attention_messages(report)[-1500:]}"
        return text


def read_reports(out: Path, ids: list[str]) -> dict[str, Any]:
    reports = {}
    for entry in ids:
        try:
            reports[entry] = json.loads((out / f"{entry}.json").read_text())
        except (OSError, ValueError):
            reports[entry] = None
    return reports


def grade_class(kit: Any, folder: Path, out: Path, *, env: dict[str, str], workdir: Path, homes: tuple[Path, ...] = (),
                prefix: tuple[str, ...] = (), listening: Listeners | None = None) -> Batch:
    """`grader batch FOLDER --out OUT --jobs 1 --suite public --timeout 120` in WORKDIR, then what it left."""
    ids = sorted(p.name for p in folder.iterdir())
    after, host = Aftermath(workdir), HostFiles(*homes)
    if listening:
        listening.reached()
    try:
        run = run_grader(kit, ["batch", str(folder), "--out", str(out), "--jobs", "1", "--suite", "public",
                               "--timeout", "120"], env={**env, **after.env}, cwd=workdir, timeout_s=BATCH_TIMEOUT_S,
                         prefix=prefix)
        leftovers = after.processes()
        files_left = after.files()
    finally:
        changes = host.changes()
    return Batch(run, read_reports(out, ids), leftovers, changes, files_left,
                 listening.reached() if listening else [])


@pytest.fixture(scope="module")
def alone(kit, grader_env, tmp_path_factory) -> Any:
    """The innocent classmate graded alone: the score it must keep in every batch."""
    workdir = tmp_path_factory.mktemp("innocent-alone")
    innocent = stage_innocent(workdir / "innocent")
    run = run_grader(kit, ["check", "attention", "--suite", "public", "--submission", str(innocent)],
                     env=grader_env, cwd=workdir, json_path=workdir / "report.json")
    assert run.returncode == 0 and run.report is not None, run.describe()
    assert attention_score(run.report), f"the innocent scores nothing even alone\n{run.describe()}"
    return run


@pytest.fixture(scope="module")
def class_batch(kit, grader_env, listeners, tmp_path_factory) -> Batch:
    """Every isolation submission, each followed by an innocent classmate, graded in one batch of one job."""
    workdir = tmp_path_factory.mktemp("isolation-batch")
    folder = workdir / "class"
    for index, name in enumerate(NAMES, 1):
        stage_hostile(name, folder / hostile_id(index, name), listeners)
        stage_innocent(folder / innocent_id(index))
    return grade_class(kit, folder, workdir / "out", env=grader_env, workdir=workdir, listening=listeners)


def test_batch_completes_with_reports_by_the_contract(class_batch, kit):
    batch = class_batch
    assert not batch.run.timed_out and batch.run.returncode == 0, batch.describe()
    problems = []
    for entry, report in batch.reports.items():
        if report is None:
            problems.append(f"{entry}: no report")
            continue
        problems += [f"{entry}: {problem}" for problem in kit.report_problems(report)]
        if report.get("status") == "failed":  # the grader's own failure, which a submission must never cause
            problems.append(f"{entry}: status 'failed': {(report.get('warnings') or [''])[0]}")
        if report.get("sandbox", "bubblewrap") != "bubblewrap":
            problems.append(f"{entry}: graded under sandbox {report.get('sandbox')!r}")
    assert not problems, "\n".join(problems) + "\n" + batch.describe()


@pytest.mark.parametrize("index, name", list(enumerate(NAMES, 1)), ids=NAMES)
def test_batch_attack_scores_zero(class_batch, index, name):
    entry = hostile_id(index, name)
    score = attention_score(class_batch.reports[entry])
    assert score == 0, f"{entry} scored {score} on attention: its attack worked\n{class_batch.describe(entry)}"


@pytest.mark.parametrize("index, name", list(enumerate(NAMES, 1)), ids=NAMES)
def test_batch_innocent_after_the_attack_keeps_its_score(class_batch, alone, index, name):
    entry = innocent_id(index)
    expected, score = attention_score(alone.report), attention_score(class_batch.reports[entry])
    assert score == expected, (f"graded right after {name} in the same sandbox, the innocent scored {score} "
                               f"instead of {expected} alone\n{class_batch.describe(entry)}")


def test_batch_leaves_no_process_behind(class_batch):
    assert not class_batch.leftovers, ("still alive after the batch (now killed):\n"
                                       + "\n".join(class_batch.leftovers) + "\n" + class_batch.describe())


def test_batch_leaves_nothing_on_disk(class_batch):
    assert not class_batch.files_left, (f"the batch left in its TMPDIR: {class_batch.files_left}\n"
                                        + class_batch.describe())
    assert not class_batch.host_changes, ("found on the host after the batch (now removed or undone):\n"
                                          + "\n".join(class_batch.host_changes) + "\n" + class_batch.describe())
    assert not class_batch.reached, f"the sandbox connected to the host's {class_batch.reached}"


# --- (c) the same, with the grader run by an unprivileged user -------------------------------------------

UNPRIVILEGED_NAMES = [name for name in ("lurker", "signal_zygote") if name in NAMES]


def _unprivileged_problem(env: dict[str, str]) -> str | None:
    """None when uid 65534 can run this Python with the kit and make a sandbox, else why not."""
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if os.geteuid() != 0:
        return "switching to uid 65534 needs root"
    probe = subprocess.run([*SETPRIV, sys.executable, "-c", "import grader, torch"], env=env, cwd="/",
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return (f"uid {NOBODY} cannot run {sys.executable} with the kit and torch "
                f"(make the installation reachable, e.g. `chmod o+x /root`): {probe.stderr.strip()[-300:]}")
    bwrap = subprocess.run([*SETPRIV, shutil.which("bwrap") or "bwrap", "--unshare-all", "--ro-bind", "/", "/",
                            "true"], env=env, cwd="/", capture_output=True, text=True, timeout=60)
    if bwrap.returncode != 0:
        return f"bubblewrap does not work for uid {NOBODY}: {bwrap.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="module")
def unprivileged_batch(kit, grader_env) -> Iterator[Batch]:
    """Lurker and signal_zygote, each followed by an innocent, graded by `grader batch` running as uid 65534."""
    problem = _unprivileged_problem(grader_env)
    if problem:
        pytest.skip(problem)
    workdir = Path(tempfile.mkdtemp(prefix="kit-isolation-nobody-"))
    try:
        home, folder, out = workdir / "home", workdir / "class", workdir / "out"
        for index, name in enumerate(UNPRIVILEGED_NAMES, 1):
            # No listener here: a network attack is not in this class.
            shutil.copytree(ISOLATION / name, folder / hostile_id(index, name))
            stage_innocent(folder / innocent_id(index))
        for path in (workdir, home, out):
            path.mkdir(exist_ok=True)
            path.chmod(0o777)
        for path in folder.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        folder.chmod(0o755)
        env = {**grader_env, "HOME": str(home)}
        yield grade_class(kit, folder, out, env=env, workdir=workdir, homes=(home,), prefix=tuple(SETPRIV))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_unprivileged_batch_holds(unprivileged_batch, alone):
    batch = unprivileged_batch
    assert not batch.run.timed_out and batch.run.returncode == 0, batch.describe()
    problems = []
    for index, name in enumerate(UNPRIVILEGED_NAMES, 1):
        hostile, innocent = hostile_id(index, name), innocent_id(index)
        if (score := attention_score(batch.reports[hostile])) != 0:
            problems.append(f"{hostile} scored {score}: its attack worked")
        if (score := attention_score(batch.reports[innocent])) != attention_score(alone.report):
            problems.append(f"{innocent}, graded right after {name}, scored {score} instead of "
                            f"{attention_score(alone.report)} alone")
        for entry in (hostile, innocent):
            report = batch.reports[entry]
            if isinstance(report, dict) and report.get("sandbox", "bubblewrap") != "bubblewrap":
                problems.append(f"{entry} graded under sandbox {report.get('sandbox')!r}")
    assert not problems, "\n".join(problems) + "\n" + "\n".join(
        batch.describe(entry) for entry in batch.reports)


def test_unprivileged_batch_leaves_nothing_behind(unprivileged_batch):
    batch = unprivileged_batch
    problems = [*(f"process still alive (now killed): {p}" for p in batch.leftovers),
                *(f"left in its TMPDIR: {f}" for f in batch.files_left),
                *(f"on the host (now removed or undone): {c}" for c in batch.host_changes)]
    assert not problems, "\n".join(problems) + "\n" + batch.describe()


# --- (d) a batch stopped halfway -------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_batch_stopped_halfway_leaves_nothing_behind(grader_env, listeners, tmp_path, signum):
    folder, out = tmp_path / "class", tmp_path / "out"
    stage_innocent(folder / "01-innocent")
    stage_hostile("fork_count", folder / "02-fork_count", listeners)
    stage_innocent(folder / "03-innocent")
    stage_innocent(folder / "04-innocent")
    after = Aftermath(tmp_path)
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--jobs", "1", "--suite",
               "public", "--timeout", "120"]
    log = (tmp_path / "stderr.txt").open("w+b")
    process = subprocess.Popen(command, cwd=tmp_path, env={**grader_env, **after.env}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    problems = []
    try:
        deadline = time.monotonic() + 300
        while not list(out.glob("0*.json")) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.poll() is not None:
            pytest.fail(f"the batch ended (exit {process.returncode}) before it could be stopped halfway")
        assert list(out.glob("0*.json")), "no report after 300 s"
        time.sleep(1.0)  # well into the next submission, whose worker has forked its sleepers by now
        process.send_signal(signum)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            problems.append(f"the batch still ran 30 s after {signum.name}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()
    stderr = (tmp_path / "stderr.txt").read_bytes()[-2000:].decode(errors="replace")
    problems += [f"process still alive (now killed): {p}" for p in after.processes()]
    problems += [f"left in its TMPDIR: {f}" for f in after.files()]
    assert not problems, "\n".join(problems) + f"\nbatch exit {process.returncode} after {signum.name}:\n{stderr}"
