"""`sandbox` runs untrusted code: it starts a sandbox and its zygote, hands it submissions, proves it clean in between.

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

Process trees are found and killed in the trusted process (`trees`), from the host's view of the
processes (psutil), never from anything the sandbox reports or mounts.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from grader.host import scratch
from grader.host.bubblewrap import (
    SCRATCH_FOLDERS,
    bwrap_command,
    needs_gpu,
    python_in_scratch,
    python_paths,
    stage_parent,
    worker_environment,
)
from grader.host.limits import Limits, SandboxUnsafe, WorkerStartError
from grader.host.tiers import fence, mark_unsafe
from grader.host.trees import adopt, become_subreaper, children_of, kill_tree, running, starting
from grader.host.workers import Client, control_request
from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID
from grader.kit import kit_root

if TYPE_CHECKING:
    from grader.intake.submission import Submission

# No torch import at module level: the command line starts the sandbox before it imports torch
# itself, so that the two imports (about a second each) run side by side.

WATCH_FILES_S = 0.05  # how often `_watch` reads the count of a sandbox's files on its tmpfs mounts
WATCH_S = 0.5  # how often it counts each worker's threads, and walks a scratch folder on disk
_TICKS_PER_WATCH = round(WATCH_S / WATCH_FILES_S)


class Sandbox:
    """A started sandbox whose process has imported torch and forks a fresh worker on request.

    It serves one submission at a time: `connect(submission)` stages the submission's files (the
    sandbox sees them read-only at /sandbox/exercises) and hands the zygote a new client
    connection. Before it hands over the next submission, `recycle` proves the sandbox clean from
    here: every process of the sandbox but the zygote killed, the scratch folders emptied, the
    zygote running and answering within a deadline; otherwise connect raises WorkerStartError and
    the caller starts a fresh sandbox.
    """

    # A test's memory budget is kept: its worker is forked with RLIMIT_DATA and RLIMIT_AS that many bytes above the
    # zygote's own (grader.inside.zygote), before any of the submission's code runs in it.
    bounds_memory = True
    reasons: tuple[str, ...] = ()  # why no stronger tier (set by backend.open_sandbox)

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
        self.address_space_above_zygote = None if needs_gpu(device) else limits.rlimits(tier)["RLIMIT_DATA"]
        # bubblewrap may run as uid 65534: it must reach and read the stage, and Python must list it,
        # so the stage is 0755 under a random name inside a folder of ours that others may cross but not list.
        self._home = Path(tempfile.mkdtemp(prefix=f"grader-{os.getpid()}-", dir=stage_parent()))
        self._home.chmod(0o711)  # crossed, never listed
        self.stage = self._home / secrets.token_hex(8)
        self.stage.mkdir()
        self.stage.chmod(0o755)  # mkdir's mode is cut by the umask (077 in some images); chmod's is not
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - the zygote writes here until close()
        self._busy = False  # a client was handed over and may not be finished yet
        self._started_ns = time.time_ns() // 10**9 * 10**9  # the scratch folders' times, given back at each recycle
        self._requests = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._self_tested = False
        self.exposed: tuple[str, ...] = ()  # what the self-test found a worker can do (the `none` tier goes on)
        self._zygote: psutil.Process | None = None
        become_subreaper()
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
            "paths": ["/sandbox" if isolate else str(self.stage), *python_paths()],
            "confine": confine,
            "strict": tier != "none",  # a sandbox that fails its self-test forks no worker
            **({} if isolate else fence(self.stage, self._scratch, python_paths())),
        }
        bootstrap = (
            "import json, os, sys; config = json.load(os.fdopen(int(sys.argv[1]), 'rb')); "
            "sys.path[:0] = config['paths']; from gradeworker.zygote import main; main(config)"
        )
        command = [sys.executable, "-I", "-S", "-c", bootstrap, str(config_in)]
        if isolate:
            command = [*bwrap_command(self.stage, device, limits), *command]
        with starting():  # adopted before any watcher lists orphans
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(theirs.fileno(), config_in),
                cwd=str(self.stage) if isolate else "/",
                env=worker_environment(),
                preexec_fn=processes.as_sandbox_user,  # uid 65534 where we are root; dies with us in any case
            )
            adopt(self.process.pid)
        theirs.close()
        os.close(config_in)
        threading.Thread(target=_send_config, args=(config_out, json.dumps(config).encode()), daemon=True).start()
        self._watching = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        """Kill the workers when one holds over `limits.tasks` threads or scratch holds over `limits.inodes` files.

        RLIMIT_NPROC caps threads only where the kernel enforces it for the sandbox's uid; a tmpfs's
        size caps its data, not its files, whose inodes the kernel keeps in memory (about 1 KiB each).
        A worker makes files on a tmpfs at some 300,000 a second: the tmpfs's count (statvfs, one call per
        mount) is read every WATCH_FILES_S, the threads and a folder on disk (a walk) every WATCH_S.
        """
        ticks = 0
        while not self._watching.wait(WATCH_FILES_S):
            ticks += 1
            with contextlib.suppress(psutil.Error, WorkerStartError, OSError):
                if not self.isolated and ticks % _TICKS_PER_WATCH:
                    continue
                zygote = self._zygote_process()
                if self.isolated:
                    files = sum(scratch.files_in(folder) for folder in self._scratch_folders(zygote))
                    full = files > self.limits.inodes
                else:  # a folder on disk, which no tmpfs caps: measured, up to the first limit passed
                    full = scratch.holds_over(self._scratch, files=self.limits.inodes, size=self.limits.scratch_bytes)
                if full or not ticks % _TICKS_PER_WATCH:
                    for worker in children_of(zygote):
                        if full or worker.num_threads() > self.limits.tasks:
                            worker.kill()

    def alive(self) -> bool:
        # Not Popen.poll(): in a process forked from ours (a batch's grading child) the sandbox is no
        # child of ours, and poll() would call it gone.
        if self.process.returncode is not None:
            return False
        try:
            return running(psutil.Process(self.process.pid))
        except psutil.Error:
            return False

    def connect(self, submission: Submission) -> Client:
        """Stage `submission` and open a client connection for it."""
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
        reply = control_request(self._control, None, 0, self._replies, timeout_s=self.limits.start_timeout_s)
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
        reply = control_request(self._control, {"op": "sync", "id": self._requests}, self._requests, self._replies,
                         timeout_s=self.limits.health_timeout_s)
        if reply is None:
            raise WorkerStartError(f"the sandbox's zygote did not answer within {self.limits.health_timeout_s:g} s")
        # Whatever the zygote says, every other process of the sandbox dies here, found from our own /proc.
        spare = {self.process.pid, zygote.pid, *(p.pid for p in zygote.parents())}
        if not kill_tree(self.process.pid, spare=spare):
            raise WorkerStartError("processes of the previous submission could not be killed")
        _check_not_stopped(zygote)
        for folder, keep in self._scratch_folders(zygote).items():
            scratch.empty(folder, keep)
            # bubblewrap's tmpfs mounts start 0755, the scratch folder outside it 0700 (both the sandbox's uid's).
            scratch.reset(folder, 0o755 if self.isolated else 0o700, self._started_ns)
        if self.tier == "user":
            scratch.remove_sandbox_files()
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

    def _scratch_folders(self, zygote: psutil.Process) -> dict[Path, tuple[str, ...]]:
        """Each scratch folder, with the names in it that Python's installation is bound on (kept when emptied)."""
        if not self.isolated:
            return {self._scratch: ()}
        # The sandbox's own tmpfs mounts, reached through its mount namespace.
        root = Path(f"/proc/{zygote.pid}/root")
        return {root / folder.lstrip("/"): python_in_scratch(folder) for folder in SCRATCH_FOLDERS}

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
            scratch.remove_sandbox_files()  # before any report is written: no planted file or link is left to follow
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._control.close()
        self._log.close()
        scratch.remove(self._home)


def _check_not_stopped(zygote: psutil.Process) -> None:
    if zygote.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE):
        raise WorkerStartError("the sandbox's zygote was stopped")


def _send_config(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError), open(fd, "wb") as pipe:
        pipe.write(data)
