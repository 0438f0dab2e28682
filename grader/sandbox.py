"""`sandbox` runs untrusted code: it starts a worker process, bounds it, and kills its whole tree.

With bubblewrap the worker sees only the Python installation, a read-only copy of the submission
and a private /tmp: no network, no kit files, its own PID namespace (so no process it starts can
outlive it). Without bubblewrap it runs with resource limits in a fresh temporary folder, and this
process becomes a child subreaper so that even children that called setsid() come back to us to be
killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import importlib.util
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# No torch import at module level: the command line starts the worker before it imports torch
# itself, so that the two imports (about a second each) run side by side.

_PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one worker may use. Per-call time is enforced here; the rest by rlimits in the worker."""

    call_timeout_s: float = 20.0
    start_timeout_s: float = 120.0
    memory_bytes: int = 4 * 2**30
    cpu_seconds: int = 1800
    file_size_bytes: int = 64 * 2**20
    output_bytes: int = 64 * 1024

    @classmethod
    def from_environment(cls) -> Limits:
        """Defaults, overridden by GRADER_MEMORY_LIMIT_MB and GRADER_CALL_TIMEOUT_S where set."""
        limits = cls()
        memory = os.environ.get("GRADER_MEMORY_LIMIT_MB")
        timeout = os.environ.get("GRADER_CALL_TIMEOUT_S")
        try:
            if memory:
                limits = dataclasses.replace(limits, memory_bytes=int(memory) * 2**20)
            if timeout:
                limits = dataclasses.replace(limits, call_timeout_s=float(timeout))
        except ValueError:
            raise ValueError(
                "GRADER_MEMORY_LIMIT_MB must be a whole number of MiB and GRADER_CALL_TIMEOUT_S a number of seconds"
            ) from None
        return limits

    def rlimits(self) -> dict[str, int]:
        # RLIMIT_DATA rather than RLIMIT_AS: torch (and CUDA above all) reserves far more address
        # space than it ever touches, while DATA counts the private writable memory actually mapped.
        return {
            "RLIMIT_DATA": self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_size_bytes,
            "RLIMIT_CORE": 0,
        }


class WorkerGone(Exception):
    """The worker process died, was killed, or broke the protocol."""


class WorkerTimeout(Exception):
    """The worker did not answer in time; it has been killed."""


class WorkerStartError(RuntimeError):
    """The worker never came up: a problem with the kit or this machine, not with the submission."""


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can sandbox here, else why not (for a one-line warning)."""
    if os.environ.get("GRADER_SANDBOX", "auto") == "none":
        return "GRADER_SANDBOX=none is set"
    path = shutil.which("bwrap")
    if path is None:
        return "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`"
    probe = subprocess.run(
        [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "true"],
        capture_output=True, text=True, timeout=30,
    )
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        return f"bubblewrap cannot create a sandbox on this machine ({reason})"
    return None


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


class WorkerProcess:
    """One started worker: its process, its two message pipes and its captured stdout and stderr."""

    def __init__(self, stage: Path, *, device: str, limits: Limits, isolate: bool) -> None:
        self.limits = limits
        self.isolated = isolate
        self.stdout = OutputTail(limits.output_bytes)
        self.stderr = OutputTail(limits.output_bytes)
        self._ready = False
        _become_subreaper()

        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        config = {
            "threads": 1,
            "limits": limits.rlimits(),
            "fd_in": to_worker_r,
            "fd_out": from_worker_w,
        }
        config["paths"] = ["/sandbox" if isolate else str(stage), *_python_paths()]
        bootstrap = (
            "import json, sys; config = json.loads(sys.argv[1]); sys.path[:0] = config['paths']; "
            "from gradeworker.worker import main; main(config)"
        )
        command = [sys.executable, "-I", "-S", "-c", bootstrap, json.dumps(config)]
        if isolate:
            command = [*_bwrap_command(stage, device), *command]
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(to_worker_r, from_worker_w),
            cwd=str(stage),
            env=_worker_environment(),
        )
        _started_by_us.add(self.process.pid)
        os.close(to_worker_r)
        os.close(from_worker_w)
        for stream, tail in ((self.process.stdout, self.stdout), (self.process.stderr, self.stderr)):
            threading.Thread(target=_drain, args=(stream, tail), daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def exchange(
        self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *, timeout_s: float
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Send one request and wait for its answer; kill the worker on timeout or protocol abuse."""
        from . import protocol

        self.wait_ready()
        try:
            protocol.write_message(self._to_worker, header, tensors)
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._death_reason()) from None
        return self._receive(time.monotonic() + timeout_s, timeout_s)

    def wait_ready(self) -> dict[str, Any]:
        if self._ready:
            return self.hello
        try:
            header, _ = self._receive(self.started_at + self.limits.start_timeout_s, self.limits.start_timeout_s)
        except (WorkerGone, WorkerTimeout) as problem:
            stderr = self.stderr.since(0).strip().splitlines()[-5:]
            raise WorkerStartError(f"the grading worker could not start: {problem}. " + " | ".join(stderr)) from None
        self.hello = header.get("value") if isinstance(header.get("value"), dict) else {}
        self._ready = True
        return self.hello

    def _receive(self, deadline: float, timeout_s: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        from . import protocol

        try:
            return protocol.read_message(self._from_worker, deadline=deadline)
        except protocol.Timeout:
            self.kill()
            raise WorkerTimeout(f"timed out after {timeout_s:g} s") from None
        except protocol.PeerClosed:
            raise WorkerGone(self._death_reason()) from None
        except protocol.ProtocolError as error:
            self.kill()
            raise WorkerGone(f"the worker broke the protocol ({error})") from None

    def _death_reason(self) -> str:
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            return "the worker closed its connection"
        self.kill()
        if self.isolated and code > 128:
            code = -(code - 128)  # bubblewrap reports a signal death as 128 + signal
        if code < 0:
            name = signal.Signals(-code).name
            hints = {
                "SIGSEGV": "a segmentation fault",
                "SIGKILL": "killed, most often for running out of memory",
                "SIGXCPU": f"over the {self.limits.cpu_seconds} s CPU-time limit",
                "SIGXFSZ": f"over the {self.limits.file_size_bytes // 2**20} MiB file-size limit",
                "SIGABRT": "aborted",
            }
            return f"the worker crashed with {name} ({hints.get(name, 'a signal')})"
        return f"the worker exited with code {code}"

    def kill(self) -> None:
        kill_tree(self.process.pid)
        for fd in (self._to_worker, self._from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._to_worker = self._from_worker = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def _drain(stream: Any, tail: OutputTail) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        tail.feed(chunk)


def _worker_environment() -> dict[str, str]:
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
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


def _python_paths() -> list[str]:
    """Where the worker finds torch and safetensors; never the kit's own folder."""
    paths = []
    for name in ("torch", "safetensors", "numpy"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed: the grader needs it (pip install {name})")
        paths.append(str(Path(spec.origin).resolve().parent.parent))
    paths += [p for p in site.getsitepackages() if os.path.isdir(p)]
    return list(dict.fromkeys(paths))


def _bwrap_command(stage: Path, device: str) -> list[str]:
    command = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all", "--die-with-parent", "--new-session",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
    ]
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
    if device != "cpu":
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
        for name in sorted(os.listdir("/dev")):
            if name.startswith("nvidia"):
                command += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    command += ["--ro-bind", str(stage), "/sandbox", "--chdir", "/tmp", "--"]
    return command


def _become_subreaper() -> None:
    global _subreaper_since
    if _subreaper_since is not None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        return
    with open("/proc/uptime") as uptime:
        _subreaper_since = float(uptime.read().split()[0]) * os.sysconf("SC_CLK_TCK") - 1


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _descendants(root: int, children: dict[int, list[int]]) -> list[int]:
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


_started_by_us: set[int] = set()
_subreaper_since: float | None = None  # in clock ticks since boot, as /proc/<pid>/stat counts


def kill_tree(root: int) -> None:
    """SIGKILL `root` and every process it started, including ones that escaped with setsid().

    Escaped processes whose parent died were re-parented to us (we are a child subreaper), so they
    show up as children of ours that we did not start, born after we became a subreaper.
    """
    me = os.getpid()
    for _ in range(100):
        children = _children_map()
        targets = [root, *_descendants(root, children)] if _alive(root) else []
        for orphan in children.get(me, []):
            if orphan not in _started_by_us and _born_after_subreaper(orphan):
                targets += [orphan, *_descendants(orphan, children)]
        if not targets:
            return
        for pid in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in targets:
            _reap(pid)
        time.sleep(0.01)


def _born_after_subreaper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            started = int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return False
    return _subreaper_since is not None and started >= _subreaper_since


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
