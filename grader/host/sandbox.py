"""`sandbox` runs untrusted code: it starts a sandbox, forks workers in it, bounds them, kills their trees.

A sandbox holds a `zygote` that imported torch once and forks a fresh worker whenever one is
needed (at the start, and after every crash), so a worker starts in milliseconds; a batch reuses
one sandbox for many submissions, one after another, and proves it clean from the outside in
between (`Sandbox.recycle`).

With bubblewrap the sandbox runs as uid/gid 65534 in its own user namespace with no capabilities,
whoever starts it (root included). It sees, read-only, only the Python installation and a copy of
the submission; / and /dev are read-only; its only writable places are /tmp and /dev/shm, tmpfs
mounts capped together at `Limits.scratch_bytes`. No network, no kit files, its own PID namespace
(so no process it starts can outlive it). Each worker is further confined by a seccomp filter
(`confine`): no new processes, no ptrace, no signals to others, no mounts, no sockets. A self-test
at start proves on this machine that the sandbox refuses what it must; a sandbox that fails it is
not used. Without bubblewrap (the `user` and `none` tiers, see `tiers`) it runs with resource limits,
the seccomp filter and Landlock where they exist, as uid 65534 if we are root, in a private scratch
folder, and this process becomes a child subreaper so that even children that called setsid() come
back to us to be killed.

Process trees are found and killed here, in the trusted process, from the host's view of the
processes (psutil), never from anything the sandbox reports or mounts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import secrets
import select
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from grader.host.tiers import fence, mark_unsafe
from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID

if TYPE_CHECKING:
    import torch

# No torch import at module level: the command line starts the sandbox before it imports torch
# itself, so that the two imports (about a second each) run side by side.


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one worker may use. Per-call time is enforced here; the rest by rlimits in the worker."""

    call_timeout_s: float = 20.0
    start_timeout_s: float = 120.0
    memory_bytes: int = 4 * 2**30
    cpu_seconds: int = 1800
    file_size_bytes: int = 64 * 2**20
    output_bytes: int = 64 * 1024
    scratch_bytes: int = 256 * 2**20  # /tmp and /dev/shm together (bubblewrap), or the scratch folder (watched)
    tasks: int = 256  # threads of one worker
    inodes: int = 65536  # files and folders in the scratch tmpfs mounts together
    health_timeout_s: float = 10.0  # for the zygote to answer between two submissions

    @classmethod
    def from_environment(cls) -> Limits:
        """Defaults, overridden by GRADER_MEMORY_LIMIT_MB, GRADER_CALL_TIMEOUT_S and GRADER_SCRATCH_MB where set."""
        limits = cls()
        memory = os.environ.get("GRADER_MEMORY_LIMIT_MB")
        timeout = os.environ.get("GRADER_CALL_TIMEOUT_S")
        scratch = os.environ.get("GRADER_SCRATCH_MB")
        try:
            if memory:
                limits = dataclasses.replace(limits, memory_bytes=int(memory) * 2**20)
            if timeout:
                limits = dataclasses.replace(limits, call_timeout_s=float(timeout))
            if scratch:
                limits = dataclasses.replace(limits, scratch_bytes=int(scratch) * 2**20)
        except ValueError:
            raise ValueError(
                "GRADER_MEMORY_LIMIT_MB and GRADER_SCRATCH_MB must be whole numbers of MiB and GRADER_CALL_TIMEOUT_S"
                " a number of seconds"
            ) from None
        if limits.scratch_bytes < 2**20:
            raise ValueError("GRADER_SCRATCH_MB must be at least 1")
        if limits.memory_bytes - limits.scratch_bytes < MIN_WORKER_MEMORY:
            raise ValueError(f"GRADER_MEMORY_LIMIT_MB must exceed GRADER_SCRATCH_MB by at least "
                             f"{MIN_WORKER_MEMORY // 2**20} MiB (the memory limit covers the scratch space too)")
        return limits

    def rlimits(self, tier: str) -> dict[str, int]:
        # RLIMIT_DATA rather than RLIMIT_AS: torch (and CUDA above all) reserves far more address
        # space than it ever touches, while DATA counts the private writable memory actually mapped;
        # thread stacks count too, so it also bounds how many threads a worker can hold. The scratch
        # tmpfs is memory too: the worker gets what the scratch cap leaves of the memory limit.
        limits = {
            "RLIMIT_DATA": self.memory_bytes - self.scratch_bytes if tier == "bubblewrap" else self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_size_bytes,
            "RLIMIT_CORE": 0,
        }
        if tier != "none":
            # Counted per uid, 65534 in both tiers (see `processes.as_sandbox_user`): as root's uid the
            # kernel would not enforce it.
            limits["RLIMIT_NPROC"] = self.tasks
        return limits


MIN_WORKER_MEMORY = 512 * 2**20  # torch alone maps about 220 MiB of private memory before any tensor


class WorkerGone(Exception):
    """The worker process died, was killed, or broke the protocol."""


class WorkerTimeout(Exception):
    """The worker did not answer in time; it has been killed."""


class WorkerStartError(RuntimeError):
    """The worker or its sandbox never came up or broke down: a problem with the kit or this machine."""


class SandboxUnsafe(WorkerStartError):
    """The sandbox came up but its self-test shows that it does not hold on this machine."""


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can sandbox here, else why not (for a one-line warning)."""
    if _bwrap() is None:
        return "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`"
    # The probe runs the sandbox's own command line, as its user (65534 when we are root), and checks
    # that Python and the packages the worker imports are readable there.
    needed = [sys.executable, *_python_paths(), stage_parent()]
    check = ('for p; do [ -x "$p" ] || { echo "cannot reach ${p#/host} as uid $(id -u): let others cross it and the '
             'folders above it (chmod o+x), or set TMPDIR to a folder they can" >&2; exit 3; }; done')
    try:
        probe = subprocess.run(
            [*_bwrap_command(None, "cpu", Limits(), more=("--ro-bind", "/", "/host")), "/bin/sh", "-c", check, "sh",
             *(f"/host{p}" for p in needed)],
            capture_output=True, text=True, timeout=30, cwd="/", preexec_fn=processes.as_sandbox_user,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap cannot run here ({error})"
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        if "Permission denied" in reason and os.geteuid() == 0:
            reason += f"; bubblewrap runs as uid {SANDBOX_UID} when the grader is root: let others cross the folders " \
                      "above Python and TMPDIR (chmod o+x)"
        return f"bubblewrap cannot create a sandbox on this machine ({reason})"
    return None


def stage_parent() -> str:
    """Where sandboxes' stages go: GRADER_STAGE_DIR (a batch's own folder), else the temporary folder."""
    return os.environ.get("GRADER_STAGE_DIR") or tempfile.gettempdir()


def _namespaces() -> list[str]:
    """Every namespace, and inside them an unprivileged uid/gid with no capability, whoever we are."""
    return ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session"]


class OutputTail:
    """Keeps the last `limit` bytes a stream produced, and where each call's output began."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            self._buffer += data
            self._total += len(data)
            del self._buffer[: max(0, len(self._buffer) - self._limit)]

    def mark(self) -> int:
        with self._lock:
            return self._total

    def since(self, mark: int) -> str:
        with self._lock:
            new = self._total - mark
            if new <= 0:
                return ""
            text = bytes(self._buffer[-min(new, len(self._buffer)):]).decode(errors="replace")
            return text if new <= len(self._buffer) else f"[... {new - len(self._buffer)} bytes cut ...]\n{text}"


class Sandbox:
    """A started sandbox whose process has imported torch and forks a fresh worker on request.

    It serves one submission at a time: `connect(submission)` stages the submission's files (the
    sandbox sees them read-only at /sandbox/exercises) and hands the zygote a new client
    connection. Before it hands over the next submission, `recycle` proves the sandbox clean from
    here: every process of the sandbox but the zygote killed, the scratch folders emptied, the
    zygote running and answering within a deadline; otherwise connect raises WorkerStartError and
    the caller starts a fresh sandbox.
    """

    def __init__(self, *, device: str, limits: Limits, tier: str, confine: bool = True) -> None:
        """`confine=False` leaves workers without their seccomp filter: only for the kit's tests of the
        clean-up between submissions, which must hold even then."""
        from grader.intake import submission

        self.limits = limits
        self.tier = tier
        self.isolated = isolate = tier == "bubblewrap"
        # RLIMIT_DATA misses shared mappings (an anonymous MAP_SHARED region is not "data"), so on the
        # CPU a worker may also map no more than its memory limit beyond what the zygote already holds.
        # CUDA reserves address space by the terabyte: not there.
        self.address_space_above_zygote = None if _gpu(device) else limits.rlimits(tier)["RLIMIT_DATA"]
        # bubblewrap may run as uid 65534: it must reach and read the stage, and Python must list it,
        # so the stage is 0755 under a random name inside a folder of ours that others may cross but not list.
        self._home = Path(tempfile.mkdtemp(prefix=f"grader-{os.getpid()}-", dir=stage_parent()))
        self._home.chmod(0o711)  # crossed, never listed
        self.stage = self._home / secrets.token_hex(8)
        self.stage.mkdir(mode=0o755)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - the zygote writes here until close()
        self._busy = False  # a client was handed over and may not be finished yet
        self._requests = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._self_tested = False
        self.exposed: tuple[str, ...] = ()  # what the self-test found a worker can do (the `none` tier goes on)
        self._zygote: psutil.Process | None = None
        global _subreaper_since
        if _subreaper_since is None and processes.become_subreaper():
            _subreaper_since = time.time()
        if tier == "none":
            processes.undumpable()  # a worker of our own uid could otherwise read our environment in /proc
        submission.stage_worker(self.stage)
        # Without bubblewrap the scratch folder is a private folder of the stage (not size-capped).
        self._scratch = self.stage / "scratch"
        if not isolate:
            self._scratch.mkdir(mode=0o700)
            if os.geteuid() == 0:  # root never runs a submission as root, whatever the tier
                os.chown(self._scratch, SANDBOX_UID, SANDBOX_UID)
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The configuration (paths to the stage, to the secrets) goes through a pipe, never the command
        # line, which every process of the machine can read in /proc.
        config_in, config_out = os.pipe()
        config = {
            "control_fd": theirs.fileno(),
            "home": None if isolate else str(self._scratch),
            "paths": ["/sandbox" if isolate else str(self.stage), *_python_paths()],
            "confine": confine,
            "strict": tier != "none",  # a sandbox that fails its self-test forks no worker
            **({} if isolate else fence(self.stage, self._scratch, _python_paths())),
        }
        bootstrap = (
            "import json, os, sys; config = json.load(os.fdopen(int(sys.argv[1]), 'rb')); "
            "sys.path[:0] = config['paths']; from gradeworker.zygote import main; main(config)"
        )
        command = [sys.executable, "-I", "-S", "-c", bootstrap, str(config_in)]
        if isolate:
            command = [*_bwrap_command(self.stage, device, limits), *command]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            pass_fds=(theirs.fileno(), config_in),
            cwd=str(self.stage) if isolate else "/",
            env=_worker_environment(),
            preexec_fn=processes.as_sandbox_user,  # uid 65534 where we are root; dies with us in any case
        )
        _started_by_us.add(self.process.pid)
        theirs.close()
        os.close(config_in)
        threading.Thread(target=_send_config, args=(config_out, json.dumps(config).encode()), daemon=True).start()
        self._watching = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        """Twice a second, kill the workers when one holds over `limits.tasks` threads or scratch holds over
        `limits.inodes` files.

        RLIMIT_NPROC caps threads only where the kernel enforces it for the sandbox's uid; a tmpfs's
        size caps its data, not its files, whose inodes the kernel keeps in memory (about 1 KiB each).
        """
        while not self._watching.wait(0.5):
            with contextlib.suppress(psutil.Error, WorkerStartError, OSError):
                zygote = self._zygote_process()
                workers = _children(zygote)
                if self.isolated:
                    files = sum(_files_in(folder) for folder in self._scratch_folders(zygote))
                    full = files > self.limits.inodes
                else:  # a folder on disk, which no tmpfs caps: measured, up to the first limit passed
                    full = _over(self._scratch, files=self.limits.inodes, size=self.limits.scratch_bytes)
                for worker in workers:
                    if worker.num_threads() > self.limits.tasks or full:
                        worker.kill()

    def alive(self) -> bool:
        # Not Popen.poll(): in a process forked from ours (a batch's grading child) the sandbox is no
        # child of ours, and poll() would call it gone.
        if self.process.returncode is not None:
            return False
        try:
            return _running(psutil.Process(self.process.pid))
        except psutil.Error:
            return False

    def connect(self, submission: Any) -> Client:
        """Stage `submission` (a submission.Submission) and open a client connection for it."""
        from grader.grade.selection import kit_root
        from grader.intake import submission as submissions

        if self._busy:
            self.recycle()
        submissions.stage_exercises(submission, kit_root=kit_root(), into=self.stage)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._control, [json.dumps({"op": "client"}).encode()], [theirs.fileno()])
        except OSError:
            mine.close()
            raise WorkerStartError(f"the sandbox is gone: {self.problem()}") from None
        finally:
            theirs.close()
        self._busy = True
        return Client(mine, self)

    def check_self_test(self) -> None:
        """Wait for the zygote's self-test (its first message); SandboxUnsafe if it allowed anything.

        Not needed before a submission is handed over (an isolated zygote that failed forks no
        worker), only before the first worker is trusted, so that start-up overlaps with ours.
        """
        if self._self_tested:
            return
        reply = _request(self._control, None, 0, self._replies, timeout_s=self.limits.start_timeout_s)
        if reply is None:
            raise WorkerStartError(f"the sandbox did not start: {self.problem()}")
        outcomes = reply.get("self_test")
        if not isinstance(outcomes, dict) or not outcomes:
            raise WorkerStartError(f"the sandbox sent no self-test: {self.problem()}")
        allowed = sorted(str(what) for what, outcome in outcomes.items() if str(outcome).startswith("ALLOWED"))
        self._self_tested = True
        self.exposed = tuple(allowed)
        if allowed and self.tier != "none":
            unsafe = SandboxUnsafe(f"the {self.tier} sandbox failed its self-test on this machine: it allowed a "
                                   f"worker to {'; '.join(allowed)}")
            mark_unsafe(self.tier, str(unsafe))
            raise unsafe

    def recycle(self) -> None:
        """Make the sandbox clean for the next submission, checked from here; WorkerStartError when it cannot be."""
        self.check_self_test()
        self._requests += 1
        if not self.alive():
            raise WorkerStartError(f"the sandbox is gone: {self.problem()}")
        zygote = self._zygote_process()
        _check_not_stopped(zygote)  # before waiting for an answer that a stopped zygote never gives
        # The zygote answers once it has finished the previous client and killed its workers.
        reply = _request(self._control, {"op": "sync", "id": self._requests}, self._requests, self._replies,
                         timeout_s=self.limits.health_timeout_s)
        if reply is None:
            raise WorkerStartError(f"the sandbox's zygote did not answer within {self.limits.health_timeout_s:g} s")
        # Whatever the zygote says, every other process of the sandbox dies here, found from our own /proc.
        spare = {self.process.pid, zygote.pid, *(p.pid for p in zygote.parents())}
        if not kill_tree(self.process.pid, spare=spare):
            raise WorkerStartError("processes of the previous submission could not be killed")
        _check_not_stopped(zygote)
        for folder in self._scratch_folders(zygote):
            _empty(folder)
        if self.tier == "user":
            _remove_sandbox_files()
        self._busy = False

    def _zygote_process(self) -> psutil.Process:
        """The zygote as the host sees it: bubblewrap's init's only child, or the process we started."""
        if self._zygote is None:
            try:
                process = psutil.Process(self.process.pid)
                if self.isolated:
                    for _ in range(2):  # bwrap, then bwrap's init in the PID namespace
                        children = process.children()
                        if len(children) != 1:
                            raise WorkerStartError("the sandbox's process tree is not bwrap, init, zygote")
                        process = children[0]
            except psutil.Error as error:
                raise WorkerStartError(f"the sandbox's zygote cannot be found: {error}") from None
            self._zygote = process
        if not self._zygote.is_running():
            raise WorkerStartError("the sandbox's zygote is gone")
        return self._zygote

    def _scratch_folders(self, zygote: psutil.Process) -> list[Path]:
        if not self.isolated:
            return [self._scratch]
        # The sandbox's own tmpfs mounts, reached through its mount namespace.
        root = Path(f"/proc/{zygote.pid}/root")
        return [root / "tmp", root / "dev" / "shm"]

    def problem(self) -> str:
        """The last lines the zygote printed, or its exit status: why it is not serving."""
        self._log.seek(0)
        lines = self._log.read()[-4000:].decode(errors="replace").strip().splitlines()[-5:]
        code = self.process.poll()
        status = f"exited with code {code}" if code is not None else "stopped answering"
        return " | ".join([status, *lines])

    def close(self) -> None:
        self._watching.set()
        kill_tree(self.process.pid)
        if self.tier == "user":
            _remove_sandbox_files()  # before any report is written: no planted file or link is left to follow
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._control.close()
        self._log.close()
        _remove(self._home)


def _check_not_stopped(zygote: psutil.Process) -> None:
    if zygote.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE):
        raise WorkerStartError("the sandbox's zygote was stopped")


def _children(process: psutil.Process) -> list[psutil.Process]:
    """`process.children()`, from the kernel's own list where it keeps one: psutil's walks every process
    on the machine, too slow to repeat twice a second beside a grading run."""
    try:
        with open(f"/proc/{process.pid}/task/{process.pid}/children") as listing:
            return [psutil.Process(int(pid)) for pid in listing.read().split()]
    except (OSError, psutil.Error):
        return process.children()


def _files_in(folder: Path) -> int:
    """How many inodes a (tmpfs) file system uses."""
    usage = os.statvfs(folder)
    return usage.f_files - usage.f_ffree


def _remove_sandbox_files() -> None:
    """Remove what the sandbox's uid left in the shared writable folders (where no Landlock kept it out),
    so that the next submission graded as the same uid finds nothing of the last one."""
    for shared in dict.fromkeys(("/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir())):
        with contextlib.suppress(OSError), os.scandir(shared) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != SANDBOX_UID:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)  # as root: no permission stops it
                    else:
                        os.unlink(entry.path)


def _over(folder: Path, *, files: int, size: int) -> bool:
    """Whether `folder` holds more than `files` entries or `size` bytes; stops counting once it does."""
    seen, used, pending = 0, 0, [str(folder)]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                seen += 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        used += entry.stat(follow_symlinks=False).st_blocks * 512
                if seen > files or used > size:
                    return True
    return False


def remove_stale_stages(folder: Path | None = None) -> None:
    """Remove the stages (`grader-<pid>-*`, `grader-batch-<pid>-*`) of grader processes that were killed outright."""
    folder = folder or Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            parts = entry.name.split("-")
            pid = parts[2] if entry.name.startswith("grader-batch-") else parts[1] if len(parts) > 2 else ""
            if entry.name.startswith("grader-") and pid.isdigit() and not psutil.pid_exists(int(pid)) \
                    and entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.geteuid():
                _remove(entry)


def _empty(folder: Path) -> None:
    """Remove everything in `folder` (modes a submission set included); WorkerStartError if anything is left."""
    try:
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                _remove(Path(entry.path))
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        left = os.listdir(folder)
    except (OSError, RecursionError) as error:  # a tree deeper than rmtree's recursion: the sandbox goes
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be emptied: {error}") from None
    if left:
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be emptied ({len(left)} left)")


def _remove(path: Path) -> None:
    """shutil.rmtree, also through folders whose owner took away its own permissions."""

    def retry(function: Any, name: str, _: Any) -> None:
        with contextlib.suppress(OSError):
            parent = os.path.dirname(name)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, stat.S_IRWXU)
            function(name)

    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    shutil.rmtree(path, onerror=retry)


class Client:
    """One submission's connection to a zygote: spawn workers, learn how they died, kill them."""

    def __init__(self, sock: socket.socket, zygote: Sandbox) -> None:
        self._socket = sock
        self.zygote = zygote
        self._requests = 0
        self._replies: dict[int, dict[str, Any]] = {}

    def spawn(self) -> WorkerProcess:
        """Ask for a fresh worker; returns at once, the worker says hello when it is ready."""
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        limits = self.zygote.limits
        ours = [to_worker_w, from_worker_r, out_r, err_r]
        try:
            request = self._send({"op": "spawn", "limits": limits.rlimits(self.zygote.tier), "threads": 1,
                                  "address_space_above_zygote": self.zygote.address_space_above_zygote},
                                 [to_worker_r, from_worker_w, out_w, err_w])
        except OSError:
            for fd in ours:
                os.close(fd)
            raise WorkerStartError(f"the sandbox is gone: {self.zygote.problem()}") from None
        finally:
            for fd in (to_worker_r, from_worker_w, out_w, err_w):
                os.close(fd)
        return WorkerProcess(self, request, to_worker_w, from_worker_r, out_r, err_r, limits)

    def call(self, message: dict[str, Any], *, timeout_s: float = 10.0) -> dict[str, Any] | None:
        """Send a request and wait for its reply; None when the zygote is gone or silent."""
        try:
            request = self._send(message, [])
        except OSError:
            return None
        return self.reply(request, timeout_s=timeout_s)

    def reply(self, request: int, *, timeout_s: float) -> dict[str, Any] | None:
        return _request(self._socket, None, request, self._replies, timeout_s=timeout_s)

    def _send(self, message: dict[str, Any], fds: list[int]) -> int:
        self._requests += 1
        socket.send_fds(self._socket, [json.dumps({**message, "id": self._requests}).encode()], fds)
        return self._requests

    def close(self) -> None:
        """Hang up: the zygote then kills this submission's workers and everything they started."""
        self._socket.close()


def _request(sock: socket.socket, message: dict[str, Any] | None, request: int,
             replies: dict[int, dict[str, Any]], *, timeout_s: float) -> dict[str, Any] | None:
    """Send `message` (unless None), then read replies until the one for `request` arrives."""
    if message is not None:
        try:
            sock.send(json.dumps(message).encode())
        except OSError:
            return None
    deadline = time.monotonic() + timeout_s
    while request not in replies:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            return None
        try:
            data = sock.recv(65536)
        except OSError:
            return None
        if not data:
            return None
        reply = json.loads(data)
        replies[int(reply.get("id", -1))] = reply
    return replies.pop(request)


class WorkerProcess:
    """One forked worker: its two message pipes, its captured stdout and stderr, its fate."""

    def __init__(self, client: Client, request: int, to_worker: int, from_worker: int, out: int, err: int,
                 limits: Limits) -> None:
        self.limits = limits
        self.isolated = client.zygote.isolated
        self.stdout = OutputTail(limits.output_bytes)
        self.stderr = OutputTail(limits.output_bytes)
        self._client = client
        self._request = request
        self._pid: int | None = None
        self._to_worker = to_worker
        os.set_blocking(to_worker, False)  # every write to the worker has a deadline (protocol.write_message)
        self._from_worker = from_worker
        self._ready = False
        self._last_id = 0  # each request's id; the hello is 0
        self.started_at = time.monotonic()
        for fd, tail in ((out, self.stdout), (err, self.stderr)):
            threading.Thread(target=_drain, args=(fd, tail), daemon=True).start()

    @property
    def pid(self) -> int | None:
        """The worker's pid inside the sandbox; None if the zygote never answered."""
        if self._pid is None and self._request:
            reply = self._client.reply(self._request, timeout_s=self.limits.start_timeout_s)
            self._request = 0
            self._pid = int(reply["pid"]) if reply and "pid" in reply else None
        return self._pid

    def exchange(
        self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *, timeout_s: float
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Send one request and wait for its answer; kill the worker on timeout or protocol abuse (ProtocolError)."""
        from grader.inside.shared import protocol

        self.wait_ready()
        deadline = time.monotonic() + timeout_s
        self._last_id += 1
        try:
            protocol.write_message(self._to_worker, {**header, "id": self._last_id}, tensors, deadline=deadline)
        except protocol.Timeout:
            self.kill()
            raise WorkerTimeout(f"timed out after {timeout_s:g} s") from None
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._death_reason()) from None
        return self._receive(deadline, timeout_s, self._last_id)

    def wait_ready(self) -> dict[str, Any]:
        from grader.inside.shared import protocol

        if self._ready:
            return self.hello
        self._client.zygote.check_self_test()
        try:  # no submission code has run yet: whatever goes wrong here is the sandbox's failure
            header, _ = self._receive(self.started_at + self.limits.start_timeout_s, self.limits.start_timeout_s, 0)
        except (WorkerGone, WorkerTimeout, protocol.ProtocolError) as problem:
            raise WorkerStartError(
                f"the grading worker could not start: {problem}. {self._client.zygote.problem()}"
            ) from None
        self.hello = header.get("value") if isinstance(header.get("value"), dict) else {}
        self._ready = True
        return self.hello

    def _receive(self, deadline: float, timeout_s: float, request_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        from grader.inside.shared import protocol

        try:
            reply = protocol.read_message(self._from_worker, deadline=deadline)
            protocol.check_reply(reply[0], request_id)
            return reply
        except protocol.Timeout:
            self.kill()
            raise WorkerTimeout(f"timed out after {timeout_s:g} s") from None
        except protocol.PeerClosed:
            raise WorkerGone(self._death_reason()) from None
        except protocol.ProtocolError:
            self.kill()  # nothing it sends later can be trusted to answer anything
            raise

    def _death_reason(self) -> str:
        pid = self.pid
        reply = self._client.call({"op": "status", "pid": pid, "wait_s": 2.0}) if pid else None
        status = (reply or {}).get("status") or {}
        self.kill()
        if not status:
            return "the worker was killed together with its sandbox"
        if status.get("running"):
            return "the worker closed its connection"
        if "signal" in status:
            name = signal.Signals(int(status["signal"])).name
            hints = {
                "SIGSEGV": "a segmentation fault",
                "SIGKILL": f"killed, most often for running out of memory, starting over {self.limits.tasks} "
                           f"threads or creating over {self.limits.inodes} files",
                "SIGXCPU": f"over the {self.limits.cpu_seconds} s CPU-time limit",
                "SIGXFSZ": f"over the {self.limits.file_size_bytes // 2**20} MiB file-size limit",
                "SIGABRT": "aborted",
            }
            return f"the worker crashed with {name} ({hints.get(name, 'a signal')})"
        return f"the worker exited with code {status.get('exit')}"

    def kill(self, *, wait: bool = True) -> None:
        """Kill this worker and everything it started (the zygote knows them all); without `wait`, only ask."""
        if self._to_worker < 0:
            return
        if wait:
            self._client.call({"op": "kill"})
        else:
            with contextlib.suppress(OSError):
                self._client._send({"op": "kill"}, [])
        for fd in (self._to_worker, self._from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._to_worker = self._from_worker = -1


def _drain(fd: int, tail: OutputTail) -> None:
    with open(fd, "rb") as stream:
        for chunk in iter(lambda: stream.read1(65536), b""):
            tail.feed(chunk)


def _send_config(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError), open(fd, "wb") as pipe:
        pipe.write(data)


def _worker_environment() -> dict[str, str]:
    """A fixed allow-list: nothing of the grader's own environment (tokens, secrets) reaches the sandbox.

    HOME and TMPDIR are /tmp (bubblewrap's tmpfs); outside bubblewrap the zygote points them at its
    scratch folder itself, once it is no longer dumpable (so that no other process reads the path).
    """
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for name in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
        if name in os.environ:
            environment[name] = os.environ[name]
    return environment


@functools.cache
def _python_paths() -> tuple[str, ...]:
    """Where the worker finds torch and safetensors; never the kit's own folder."""
    paths = []
    for name in ("torch", "safetensors", "numpy"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed: the grader needs it (pip install {name})")
        paths.append(str(Path(spec.origin).resolve().parent.parent))
    paths += [p for p in site.getsitepackages() if os.path.isdir(p)]
    return tuple(dict.fromkeys(paths))


def _bwrap() -> str | None:
    """The bubblewrap program: GRADER_BWRAP where set, else `bwrap` on PATH."""
    return os.environ.get("GRADER_BWRAP") or shutil.which("bwrap")


def _bwrap_command(stage: Path | None, device: str, limits: Limits, *, more: tuple[str, ...] = ()) -> list[str]:
    """bubblewrap's arguments for a sandbox of `stage` (None: the same sandbox without one, for the probe).

    `more` goes after every other mount, before / is made read-only. bubblewrap may run as uid
    65534: every folder above a bound path must let others cross it (`bwrap_problem` checks).
    """
    command = [_bwrap() or "bwrap", *_namespaces(), "--proc", "/proc", "--dev", "/dev"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(path):
            command += ["--ro-bind", path, path]
    bound: list[str] = []
    for path in [sys.base_prefix, sys.prefix, *_python_paths()]:
        real = os.path.realpath(path)
        if not any(real == b or real.startswith(b + os.sep) for b in bound):
            command += ["--ro-bind", real, real]
            if real != path:
                command += ["--symlink", real, path]
            bound.append(real)
    # An installed copy of the kit inside site-packages must stay out of sight too.
    for site_dir in _python_paths():
        for name in ("solutions", "tests", "grader", "exercises"):
            if os.path.isdir(os.path.join(site_dir, name)):
                command += ["--tmpfs", os.path.realpath(os.path.join(site_dir, name))]
    if _gpu(device):
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
        for name in sorted(os.listdir("/dev")):
            if name.startswith("nvidia"):
                command += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    # Scratch space: /tmp gets three quarters of the cap, /dev/shm the rest; nothing else is writable.
    shm = max(2**20, limits.scratch_bytes // 4)
    command += ["--size", str(limits.scratch_bytes - shm), "--tmpfs", "/tmp",
                "--size", str(shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    if stage is not None:
        command += ["--ro-bind", str(stage), "/sandbox"]
    return [*command, *more, "--remount-ro", "/", "--chdir", "/tmp", "--"]


def _gpu(device: str) -> bool:
    """Whether the sandbox needs the GPU's devices: asked for, or `auto` on a machine that has NVIDIA devices."""
    if device == "cpu":
        return False
    with contextlib.suppress(OSError):
        return any(name.startswith("nvidia") for name in os.listdir("/dev"))
    return False


_started_by_us: set[int] = set()
_subreaper_since: float | None = None  # when this process became a child subreaper (time.time())


def adopt(pid: int) -> None:
    """`pid` is a child this process started itself (a forked grading process), never an escaped orphan."""
    _started_by_us.add(pid)


def kill_tree(root: int, *, spare: set[int] | frozenset[int] = frozenset()) -> bool:
    """SIGKILL `root` and every process below it but `spare`, including ones that escaped with setsid().

    Escaped processes whose parent died were re-parented to us (we are a child subreaper), so they
    show up as children of ours that we did not start, born after we became a subreaper. Returns
    whether none is left. psutil identifies a process by pid and start time, so a pid reused
    meanwhile is never killed by mistake.
    """
    for _ in range(200):
        targets = [p for p in _tree(root) + _orphans() if p.pid not in spare and _running(p)]
        if not targets:
            return True
        for process in targets:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(targets, timeout=0.05)
    return False


def _running(process: psutil.Process) -> bool:
    """Alive and not a zombie (a zombie holds nothing and is gone once its parent reaps it)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(root: int) -> list[psutil.Process]:
    try:
        process = psutil.Process(root)
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def _orphans() -> list[psutil.Process]:
    if _subreaper_since is None:
        return []
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.pid not in _started_by_us and child.create_time() >= _subreaper_since - 1:
                found += [child, *child.children(recursive=True)]
    return found
