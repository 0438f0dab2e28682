"""`portable` runs a submission's workers where the zygote cannot: Windows, macOS, Linux with GRADER_WORKERS=spawn.

The zygote forks workers and talks to them over SOCK_SEQPACKET socket pairs, with rlimits, seccomp and
Landlock in between: Linux only. Here each worker is a process started from scratch
(`python -I -S`, then `grader.inside.portable`), and the link is what every OS has: its standard input
and output, carrying the protocol's frames (JSON + safetensors, checked on arrival exactly as from a
forked worker). Pipes cannot be waited on with select() everywhere, so a thread reads each frame and a
thread writes each request, and the caller waits for them with a deadline; a worker that misses one is
killed, whole tree, through psutil. One worker, started as the sandbox is (it imports torch while the
grader does), serves every call of a run until it crashes; the next is started then.

What bounds a worker here: its time per call and per run (`Connection`), its memory and CPU time
watched from here through psutil (every OS; on Linux with the shared memory it holds, `shmem`), rlimits
it sets on itself on macOS, a Job Object's memory limit on Windows where pywin32 is installed, and uid
65534 when the grader is root. What a worker leaves in the shared folders (/tmp, /var/tmp, /dev/shm) and
its System V segments are removed once it is gone, as the zygote's `user` tier removes them
(`scratch.remove_sandbox_files`). No namespaces, no seccomp, no Landlock: this is the `none` tier, every
report says so, and what it would expose (hidden tests, solutions) is refused as at the `none` tier on
Linux. `grader batch` refuses it outright.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import settings
from grader.host import scratch, shmem, trees
from grader.host.limits import Limits, WorkerStartError
from grader.host.spawned import PortableWorker
from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID
from grader.kit import kit_root
from grader.lang import tr

if TYPE_CHECKING:
    from grader.intake.submission import Submission


# `python -I -S -c BOOTSTRAP`: reads its configuration (one JSON line) a byte at a time, so that no buffer takes the
# first request with it, puts the staged worker package on the path and hands over.
BOOTSTRAP = (
    "import json, os, sys\n"
    "line = b''\n"
    "while not line.endswith(b'\\n'):\n"
    "    byte = os.read(0, 1)\n"
    "    if not byte:\n"
    "        sys.exit(0)\n"
    "    line += byte\n"
    "config = json.loads(line)\n"
    "sys.path[:0] = config['paths']\n"
    "from gradeworker.portable import main\n"
    "main(config)\n"
)


def requested() -> str:
    """GRADER_WORKERS: `auto` (spawn where there is no zygote: not Linux), `fork` (the zygote) or `spawn`."""
    wanted = settings.workers()
    if wanted not in ("auto", "fork", "spawn"):
        raise ValueError(f"GRADER_WORKERS={wanted!r} is not a way to start workers: use auto, fork or spawn")
    if wanted == "fork" and not sys.platform.startswith("linux"):
        raise ValueError(f"GRADER_WORKERS=fork needs Linux, and this is {sys.platform}: unset it")
    return wanted


def wanted() -> bool:
    """Whether workers are spawned here rather than forked from a zygote."""
    choice = requested()
    return choice == "spawn" or (choice == "auto" and not sys.platform.startswith("linux"))


def reason() -> str:
    """Why this machine grades at the `none` tier with spawned workers, for the report's warning."""
    if settings.workers() == "spawn":
        return tr("GRADER_WORKERS=spawn is set")
    return tr("{system} has no namespaces, seccomp or Landlock", system=_system())


def remedy() -> str:
    """How to grade with isolation instead, in a few words."""
    if sys.platform.startswith("linux"):
        return tr("unset GRADER_WORKERS, so that workers are forked in Linux's sandbox")
    return tr("grade on Linux")


def _system() -> str:
    return {"darwin": "macOS", "win32": "Windows"}.get(sys.platform, sys.platform)


class PortableSandbox:
    """What `grader.host.sandbox.Sandbox` is to forked workers, for spawned ones: a stage, a scratch folder, and
    a worker started ahead (torch imported) for the next submission's first call."""

    tier = "none"
    isolated = False
    exposed: tuple[str, ...] = ()
    bounds_memory = False  # no per-test memory budget: see PortableClient.spawn
    reasons: tuple[str, ...] = ()  # why no stronger tier (set by backend.open_sandbox)

    def __init__(self, *, device: str, limits: Limits) -> None:
        from grader.host.bubblewrap import python_paths, stage_parent
        from grader.intake import submission

        self.limits = limits
        self.device = device
        self.warm = False  # tests that need a warm worker were collected: workers started from now on warm up
        # On Linux, as the zygote's `none` tier does: undumpable, so that a worker of our own uid cannot read our
        # environment (tokens) or open our files through /proc; a subreaper, so that what a worker's processes leave
        # behind (a double fork, setsid) is killed with it (see `spawned`). Both are no-ops elsewhere.
        processes.undumpable()
        trees.become_subreaper()
        self._home = Path(tempfile.mkdtemp(prefix=f"grader-{os.getpid()}-", dir=stage_parent()))
        self.stage = self._home / "stage"
        self.stage.mkdir()
        submission.stage_worker(self.stage)
        self._scratch = self._home / "scratch"
        self._scratch.mkdir()
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if self._as_root:  # root never runs a submission as root: uid 65534 crosses home, reads the stage
            self._home.chmod(0o711)
            self.stage.chmod(0o755)
            os.chown(self._scratch, SANDBOX_UID, SANDBOX_UID)
        self._scratch.chmod(0o700)
        self._paths = [str(self.stage), *python_paths()]
        self._client: PortableClient | None = None
        self._spare: PortableWorker | None = None
        self._before = self._shared_now()  # where the workers are the grader's own uid, what is not theirs to remove
        self._shared = shmem.SharedMemory.for_worker(SANDBOX_UID if self._as_root else None, files=limits.inodes)
        self._clean()  # what a grader killed outright left would count against our first worker
        self._spare = self.start_worker()

    # --- what Workers, Connection and GradingSession ask of a sandbox --------------------------------

    def alive(self) -> bool:
        return True  # no process of its own to lose: each worker is started on its own

    def check_self_test(self) -> None:
        """Nothing to wait for: a spawned worker is confined by nothing a self-test could prove."""

    def problem(self) -> str:
        return ""

    def connect(self, submission: Submission) -> PortableClient:
        from grader.intake import submission as submissions

        if self._client is not None:
            self._client.close()
            scratch.empty(self._scratch)
            if self._shared is not None:
                self._shared.restart()
        submissions.stage_exercises(submission, kit_root=kit_root(), into=self.stage)
        self._client = PortableClient(self)
        return self._client

    def take_worker(self) -> PortableWorker:
        """The worker started ahead, if it is still of use, else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None and spare.warm == self.warm and spare.alive():
            return spare
        if spare is not None:
            spare.kill()
        return self.start_worker()

    def start_worker(self) -> PortableWorker:
        config = {"paths": self._paths, "home": str(self._scratch), "limits": self._rlimits(), "threads": 1,
                  "warm": self.warm}
        options: dict[str, Any] = {}
        if sys.platform == "win32":
            options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
        else:
            options["start_new_session"] = True  # a Ctrl-C at the terminal reaches the grader, which ends the worker
        if self._as_root:
            options.update(user=SANDBOX_UID, group=SANDBOX_UID, extra_groups=[])
        with trees.starting():
            try:
                process = subprocess.Popen([sys.executable, "-I", "-S", "-c", BOOTSTRAP], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                           cwd=str(self._scratch), env=self._environment(), **options)
            except OSError as error:
                raise WorkerStartError(f"the grading worker could not start: {error}") from None
            worker = PortableWorker(process, self.limits, warm=self.warm, shared=self._shared, on_end=self._ended)
        _windows_job(worker, self.limits)
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps(config).encode() + b"\n")
        except OSError:
            pass  # it died at once: its hello never comes, and wait_ready says how it ended
        return worker

    def _rlimits(self) -> dict[str, int]:
        """What a worker sets on itself: on macOS only (see grader.inside.portable)."""
        if sys.platform != "darwin":
            return {}
        return {"RLIMIT_CPU": self.limits.cpu_seconds, "RLIMIT_FSIZE": self.limits.file_size_bytes,
                "RLIMIT_CORE": 0, "RLIMIT_DATA": self.limits.memory_bytes}

    def _environment(self) -> dict[str, str]:
        """The worker's environment: an allow-list, as in every tier, its home and temporary folder the scratch."""
        from grader.host.bubblewrap import worker_environment

        home = str(self._scratch)
        environment = {**worker_environment(), "HOME": home, "TMPDIR": home}
        if sys.platform == "win32":  # Windows' own DLLs and temporary folder
            environment.update({name: os.environ[name] for name in ("SYSTEMROOT", "WINDIR") if name in os.environ})
            environment.update(TEMP=home, TMP=home, USERPROFILE=home,
                               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        return environment

    def _ended(self, worker: PortableWorker) -> None:
        """A worker and all it started are gone (its end, a crash, a kill past its limits): what it left in the
        shared folders and shared memory goes, unless another worker of this sandbox still runs."""
        others = [*(self._client.workers if self._client is not None else ()), self._spare]
        if not any(other is not None and other is not worker and other.alive() for other in others):
            self._clean()

    def _shared_now(self) -> tuple[frozenset[tuple[int, int]], frozenset[int]]:
        """The entries at the top of the shared folders and the System V segments there are now (Linux, where the
        workers are the grader's own uid: what its clean-up keeps)."""
        if self._as_root or not sys.platform.startswith("linux"):
            return frozenset(), frozenset()
        return scratch.shared_entries(), frozenset(number for number, *_ in shmem.segments())

    def _clean(self) -> None:
        """Remove what the workers' uid left in the shared folders (/tmp, /var/tmp, /dev/shm), as the zygote's `user`
        tier does between submissions, and its System V segments: as root, all of uid 65534's; on Linux as the
        grader's own uid, what was not there when this sandbox started; elsewhere nothing (the workers' own
        folder is removed with the sandbox)."""
        if self._as_root:
            scratch.remove_sandbox_files()
            shmem.remove_segments(uid=SANDBOX_UID)
        elif sys.platform.startswith("linux"):
            entries, segments = self._before
            scratch.remove_sandbox_files(uid=os.geteuid(), keep=entries)
            shmem.remove_segments(uid=os.geteuid(), keep=segments)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._spare is not None:
            self._spare.kill()
            self._spare = None
        self._clean()  # each worker's end cleaned already, unless it escaped us: once more before any report
        scratch.remove(self._home)


class PortableClient:
    """One submission's link to its portable sandbox: the workers started for it, all killed when it hangs up."""

    def __init__(self, sandbox: PortableSandbox) -> None:
        self.sandbox = sandbox
        self._workers: list[PortableWorker] = []

    @property
    def workers(self) -> tuple[PortableWorker, ...]:
        return tuple(self._workers)

    def spawn(self, *, memory_above: int | None = None) -> PortableWorker:
        """A started worker from the pool. `memory_above` cannot be kept here (the worker started before it was asked,
        and no zygote's memory is shared): a test with a memory budget is not run where it is asked for
        (`PortableSandbox.bounds_memory`)."""
        del memory_above
        worker = self.sandbox.take_worker()
        self._workers = [w for w in self._workers if w.alive()] + [worker]
        return worker

    def warm(self) -> None:
        """Workers started from now on warm up before they say hello (the zygote's warm-up, paid by each)."""
        self.sandbox.warm = True

    def close(self) -> None:
        for worker in self._workers:
            worker.kill()
        self._workers.clear()


def _windows_job(worker: PortableWorker, limits: Limits) -> None:
    """On Windows, a Job Object that caps the worker's memory and kills it with the grader (pywin32, where
    installed); nowhere else, and without pywin32 the memory watcher alone bounds it."""
    if sys.platform != "win32":
        return
    try:
        import win32api  # type: ignore[import-not-found]
        import win32con  # type: ignore[import-not-found]
        import win32job  # type: ignore[import-not-found]
    except ImportError:
        return
    with contextlib.suppress(Exception):  # a job it cannot join (nested jobs on old Windows) leaves the watcher
        job = win32job.CreateJobObject(None, "")
        info = win32job.QueryInformationJobObject(job, win32job.JobObjectExtendedLimitInformation)
        info["ProcessMemoryLimit"] = limits.memory_bytes
        info["BasicLimitInformation"]["LimitFlags"] = (win32job.JOB_OBJECT_LIMIT_PROCESS_MEMORY
                                                       | win32job.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)
        win32job.SetInformationJobObject(job, win32job.JobObjectExtendedLimitInformation, info)
        handle = win32api.OpenProcess(win32con.PROCESS_SET_QUOTA | win32con.PROCESS_TERMINATE, False, worker.pid)
        win32job.AssignProcessToJobObject(job, handle)
        worker.job = job  # type: ignore[attr-defined] - closed with the worker object: the job's processes die
