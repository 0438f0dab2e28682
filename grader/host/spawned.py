"""`spawned` is the trusted side's link to one spawned worker (see `portable`): frames over its stdin and stdout.

A thread reads each frame (only when one is awaited) and a thread writes each request; the caller waits
for them with a deadline, and a worker that misses one is killed with its descendants, found through
psutil. A third thread keeps the tail of what it prints, a fourth reads its memory and CPU time and ends
it past its limits: the bounds every OS allows to be read from outside. On Linux this process is also a
child subreaper, so that what leaves a worker's tree (a double fork, setsid) comes back to it, is counted
with the worker and is killed with it; elsewhere such a process is out of reach. On Linux its memory also
counts the shared memory it holds outside its processes (`shmem`: files in a tmpfs such as /dev/shm, memfds),
and once it is gone its sandbox removes what it left in the shared folders (`on_end`).
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil

from grader.host import trees
from grader.host.limits import Limits, WorkerGone, WorkerStartError, WorkerTimeout
from grader.host.workers import OutputTail, death_reason
from grader.lang import tr

if TYPE_CHECKING:
    import torch

    from grader.host.shmem import SharedMemory

WATCH_S = 0.1  # how often a worker's memory and CPU time are read
KILL_ROUNDS = 50  # a worker's processes are killed until none is left, 0.1 s apart: a fork loop outruns one round
# Windows reports a crash as an NTSTATUS exit code, not a signal.
_WINDOWS_CRASHES = {0xC0000005: "SIGSEGV", 0xC00000FD: "SIGSEGV", 0xC0000409: "SIGABRT"}


class PortableWorker:
    """A spawned worker: what `grader.host.workers.WorkerProcess` is to a forked one, over its stdin and stdout."""

    isolated = False

    def __init__(self, process: subprocess.Popen[bytes], limits: Limits, *, warm: bool,
                 shared: SharedMemory | None = None, on_end: Callable[[PortableWorker], None] | None = None) -> None:
        """`shared` adds what the worker holds in shared memory to its memory (Linux); `on_end` is called once it
        and every process it started are gone, however it ended."""
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        self.process = process
        self.limits = limits
        self.warm = warm
        self.shared = shared
        self.on_end = on_end
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
        # Each pipe is closed by the thread that uses it, or by kill() when none does: a descriptor closed under a
        # blocked read or write (a process that escaped kill() holds the other end) keeps that thread on its
        # number, which the next worker's pipe then gets: it would read the next worker's replies, or write into
        # its requests.
        self._pipes = threading.Lock()
        self._writing = False
        try:  # by pid and start time: a pid reused once the worker is gone is never taken for it
            self._root: psutil.Process | None = psutil.Process(process.pid)
            self._born = self._root.create_time()
        except psutil.Error:
            self._root, self._born = None, time.time()
        trees.adopt(process.pid)  # a worker, never taken for what escaped one
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
        try:
            while True:
                self._wanted.acquire()
                if self._killed.is_set():
                    return
                try:
                    self._replies.put(protocol.read_message(fd))
                except Exception as error:  # PeerClosed (the worker and all it started are gone) or ProtocolError
                    self._replies.put(error)
                    return
        finally:
            _close(self.process.stdout)  # here, once no read is under way (see __init__)

    def _drain(self) -> None:
        assert self.process.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for chunk in iter(lambda: self.process.stderr.read(65536), b""):  # type: ignore[union-attr]
                self.stderr.feed(chunk)

    def _watch(self) -> None:
        """Kill the worker once its tree holds over the memory limit or has used over its CPU time."""
        if self._root is None:
            return
        while not self._killed.wait(WATCH_S):
            if not self._root.is_running():
                return
            tree = self._tree()
            trees.reap(tree)  # each hop of a process that forks and exits again and again leaves us a zombie
            memory, cpu = _usage(tree)
            # Once it said hello: before, no submission code ran in it, and what an earlier worker left is not a
            # reason for this one not to start (the grader's failure), but for its first call to fail.
            if self.shared is not None and self._ready and memory <= self.limits.memory_bytes:
                memory += self.shared.held(tree)
            if memory > self.limits.memory_bytes:
                self._over = tr("over the {mib} MiB memory limit", mib=self.limits.memory_bytes // 2**20)
            elif cpu > self.limits.cpu_seconds:
                self._over = tr("over the {seconds} s CPU-time limit", seconds=self.limits.cpu_seconds)
            if self._over:
                self._end_tree()
                return

    def _tree(self) -> list[psutil.Process]:
        """The worker, its descendants, and what escaped them (see `_escaped`)."""
        tree: list[psutil.Process] = []
        if self._root is not None and self._root.is_running():  # not its pid taken by another process since
            with contextlib.suppress(psutil.Error):
                tree = [self._root, *self._root.children(recursive=True)]
        return tree + self._escaped()

    def _escaped(self) -> list[psutil.Process]:
        """What left this worker's tree and was handed to us, the subreaper (Linux): our children that no worker
        of ours is, started since this worker was, and theirs. A grading process starts no other process while a
        worker runs, and one worker runs at a time (the one started ahead runs no submission code until taken)."""
        return trees.orphans(since=self._born)

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
        with self._pipes:
            killed = self._killed.is_set()
            if not killed:
                fd = self.process.stdin.fileno()
                self._writing = True
        if killed:
            raise WorkerGone(self._death_reason())

        def write() -> None:
            try:
                protocol.write_message(fd, header, tensors)
            except BaseException as error:
                failed.append(error)
            finally:
                with self._pipes:
                    self._writing = False
                    if self._killed.is_set():
                        _close(self.process.stdin)  # kill() left it to us (see __init__)

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
        """Kill the worker, its descendants and what escaped them (psutil, from here), round after round until none
        is left: a process that forks as it is killed leaves children that the next round finds. The worker itself
        is reaped by its Popen (its exit status is how it died), escapees by us, whose children they became."""
        quiet = False
        for _ in range(KILL_ROUNDS):
            tree = self._tree()
            alive = [p for p in tree if trees.running(p)]
            for process in alive:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            trees.reap([p for p in tree if p.pid != self.process.pid])
            if not alive:
                if quiet:
                    break
                quiet = True  # once more: what forked between a listing and its checks is in the next listing only
                continue
            quiet = False
            others = [p for p in alive if p.pid != self.process.pid]
            psutil.wait_procs(others, timeout=WATCH_S)
            if len(others) < len(alive):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=WATCH_S)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def kill(self, *, wait: bool = True) -> None:
        """Kill this worker and its descendants; `wait` is the forked worker's option, always true here."""
        if self._killed.is_set():
            return
        self._killed.set()
        self._end_tree()
        self._wanted.release()  # the reader, waiting for its turn or for the end of a frame, ends and closes its pipe
        with self._pipes:
            if not self._writing:
                _close(self.process.stdin)
        if self.on_end is not None:
            self.on_end(self)


def _usage(tree: list[psutil.Process]) -> tuple[int, float]:
    """The memory and CPU time of a worker's processes (`PortableWorker._tree`); one gone since it was listed, or
    not ours to read, is left out of this reading rather than the whole reading skipped."""
    memory, cpu = 0, 0.0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            memory += process.memory_info().rss
            cpu += sum(process.cpu_times()[:2])
    return memory, cpu


def _close(stream: Any) -> None:
    with contextlib.suppress(OSError):
        stream.close()


def _signal_number(name: str) -> int:
    import signal

    return int(getattr(signal, name, signal.SIGABRT))
