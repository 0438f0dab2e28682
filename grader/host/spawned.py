"""`spawned` is the trusted side's link to one spawned worker (see `portable`): frames over its stdin and stdout.

A thread reads each frame (only when one is awaited) and a thread writes each request; the caller waits
for them with a deadline, and a worker that misses one is killed with its descendants, found through
psutil. A third thread keeps the tail of what it prints, a fourth reads its memory and CPU time and ends
it past its limits: the bounds every OS allows to be read from outside.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import psutil

from grader.host.limits import Limits, WorkerGone, WorkerStartError, WorkerTimeout
from grader.host.workers import OutputTail, death_reason
from grader.lang import tr

if TYPE_CHECKING:
    import torch

WATCH_S = 0.1  # how often a worker's memory and CPU time are read
# Windows reports a crash as an NTSTATUS exit code, not a signal.
_WINDOWS_CRASHES = {0xC0000005: "SIGSEGV", 0xC00000FD: "SIGSEGV", 0xC0000409: "SIGABRT"}


class PortableWorker:
    """A spawned worker: what `grader.host.workers.WorkerProcess` is to a forked one, over its stdin and stdout."""

    isolated = False

    def __init__(self, process: subprocess.Popen[bytes], limits: Limits, *, warm: bool) -> None:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        self.process = process
        self.limits = limits
        self.warm = warm
        self.stdout = OutputTail(limits.output_bytes)  # stays empty: a spawned worker prints to its stderr
        self.stderr = OutputTail(limits.output_bytes)
        self.started_at = time.monotonic()
        self.hello: dict[str, Any] = {}
        self._ready = False
        self._last_id = 0
        self._killed = threading.Event()
        self._over = ""  # the limit the watcher killed it for
        self._replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._wanted = threading.Semaphore(0)  # the reader reads a frame only when one is awaited
        for target in (self._read, self._drain, self._watch):
            threading.Thread(target=target, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def ready(self) -> bool:
        return self._ready

    def alive(self) -> bool:
        return not self._killed.is_set() and self.process.poll() is None

    # --- threads -------------------------------------------------------------------------------------

    def _read(self) -> None:
        from grader.inside.shared import protocol

        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while True:
            self._wanted.acquire()
            if self._killed.is_set():
                return
            try:
                self._replies.put(protocol.read_message(fd))
            except Exception as error:  # PeerClosed, ProtocolError, or the pipe closed by kill()
                self._replies.put(error)
                return

    def _drain(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: self.process.stderr.read(65536), b""):  # type: ignore[union-attr]
                self.stderr.feed(chunk)

    def _watch(self) -> None:
        """Kill the worker once its tree holds over the memory limit or has used over its CPU time."""
        try:
            root = psutil.Process(self.process.pid)
        except psutil.Error:
            return
        while not self._killed.wait(WATCH_S):
            try:
                tree = [root, *root.children(recursive=True)]
                memory = sum(p.memory_info().rss for p in tree)
                cpu = sum(sum(p.cpu_times()[:2]) for p in tree)
            except psutil.Error:
                if not root.is_running():
                    return
                continue
            if memory > self.limits.memory_bytes:
                self._over = tr("over the {mib} MiB memory limit", mib=self.limits.memory_bytes // 2**20)
            elif cpu > self.limits.cpu_seconds:
                self._over = tr("over the {seconds} s CPU-time limit", seconds=self.limits.cpu_seconds)
            if self._over:
                self._end_tree()
                return

    # --- requests ------------------------------------------------------------------------------------

    def wait_ready(self) -> dict[str, Any]:
        if self._ready:
            return self.hello
        from grader.inside.shared import protocol

        try:  # no submission code has run yet: whatever goes wrong here is the grader's failure
            header, _ = self._receive(self.started_at + self.limits.start_timeout_s, self.limits.start_timeout_s, 0)
        except (WorkerGone, WorkerTimeout, protocol.ProtocolError) as problem:
            tail = self.stderr.since(0).strip().splitlines()[-3:]
            raise WorkerStartError(" | ".join([tr("the grading worker could not start: {problem}", problem=problem),
                                               *tail])) from None
        self.hello = header.get("value") if isinstance(header.get("value"), dict) else {}
        self._ready = True
        return self.hello

    def exchange(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *,
                 timeout_s: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Send one request and wait for its answer; kill the worker on timeout or protocol abuse (ProtocolError)."""
        self.wait_ready()
        deadline = time.monotonic() + timeout_s
        self._last_id += 1
        self._send({**header, "id": self._last_id}, tensors, deadline, timeout_s)
        return self._receive(deadline, timeout_s, self._last_id)

    def _send(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], deadline: float,
              timeout_s: float) -> None:
        """Write one request from a thread of its own: a worker that stops reading must not hold the grader."""
        from grader.inside.shared import protocol

        assert self.process.stdin is not None
        failed: list[BaseException] = []
        fd = self.process.stdin.fileno()

        def write() -> None:
            try:
                protocol.write_message(fd, header, tensors)
            except BaseException as error:
                failed.append(error)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(max(0.0, deadline - time.monotonic()))
        if writer.is_alive():
            self.kill()
            raise WorkerTimeout(tr("timed out after {seconds} s", seconds=f"{timeout_s:g}"))
        if failed:
            if isinstance(failed[0], OSError):
                raise WorkerGone(self._death_reason())
            raise failed[0]

    def _receive(self, deadline: float, timeout_s: float, request_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        from grader.inside.shared import protocol

        if self._killed.is_set():
            raise WorkerGone(self._death_reason())
        self._wanted.release()
        try:
            reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.kill()
            raise WorkerTimeout(tr("timed out after {seconds} s", seconds=f"{timeout_s:g}")) from None
        if isinstance(reply, (protocol.PeerClosed, OSError)):
            raise WorkerGone(self._death_reason())
        if isinstance(reply, BaseException):
            self.kill()  # nothing it sends later can be trusted to answer anything
            raise reply
        try:
            protocol.check_reply(reply[0], request_id)
        except protocol.ProtocolError:
            self.kill()
            raise
        return reply

    # --- its end -------------------------------------------------------------------------------------

    def _death_reason(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=2.0)
        code = self.process.returncode
        over = self._over
        self.kill()
        if over:
            return tr("the worker was stopped: {why}", why=over)
        if code is None:
            return death_reason({"running": True}, self.limits)
        if code < 0:
            return death_reason({"signal": -code}, self.limits)
        if sys.platform == "win32" and code & 0xFFFFFFFF in _WINDOWS_CRASHES:
            return death_reason({"signal": _signal_number(_WINDOWS_CRASHES[code & 0xFFFFFFFF])}, self.limits)
        return death_reason({"exit": code}, self.limits)

    def _end_tree(self) -> None:
        """Kill the worker and every process it started that is still its descendant (psutil, from here)."""
        try:
            root = psutil.Process(self.process.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for process in tree:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(tree, timeout=5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def kill(self, *, wait: bool = True) -> None:
        """Kill this worker and its descendants; `wait` is the forked worker's option, always true here."""
        if self._killed.is_set():
            return
        self._killed.set()
        self._end_tree()
        self._wanted.release()  # the reader, if it waits for a turn, ends
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]


def _signal_number(name: str) -> int:
    import signal

    return int(getattr(signal, name, signal.SIGABRT))
