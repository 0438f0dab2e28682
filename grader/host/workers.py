"""`workers` talks to a sandbox's zygote: one client connection per submission, and the workers it forks.

A `Client` asks the zygote for workers, learns how they died and has them killed; a `WorkerProcess`
sends a worker requests (grader.inside.shared.protocol) under deadlines and keeps the tail of its output.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from grader.host.limits import Limits, WorkerGone, WorkerStartError, WorkerTimeout
from grader.lang import tr

if TYPE_CHECKING:
    import torch


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


class ZygoteSandbox(Protocol):
    """What a Client asks of the sandbox its zygote runs in, `sandbox.Sandbox`: the limits and tier its workers are
    spawned with, and what to say when a worker cannot start. Named here so that workers.py, whose clients the
    sandbox opens, does not import the sandbox back."""

    limits: Limits
    tier: str
    isolated: bool
    address_space_above_zygote: int | None

    def problem(self) -> str: ...

    def check_self_test(self) -> None: ...


class Client:
    """One submission's connection to a zygote: spawn workers, learn how they died, kill them."""

    def __init__(self, sock: socket.socket, sandbox: ZygoteSandbox) -> None:
        self._socket = sock
        self.sandbox = sandbox
        self._requests = 0
        self._replies: dict[int, dict[str, Any]] = {}

    def spawn(self, *, memory_above: int | None = None) -> WorkerProcess:
        """Ask for a fresh worker; returns at once, the worker says hello when it is ready. With `memory_above`, its
        private memory and address space may grow at most that many bytes above its zygote's (a test's budget)."""
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        limits = self.sandbox.limits
        ours = [to_worker_w, from_worker_r, out_r, err_r]
        try:
            above = self.sandbox.address_space_above_zygote  # None on a GPU: CUDA reserves address space by the TiB
            if memory_above is not None and above is not None:
                above = min(above, memory_above)
            request = self._send({"op": "spawn", "limits": limits.rlimits(self.sandbox.tier), "threads": 1,
                                  "address_space_above_zygote": above, "data_above_zygote": memory_above},
                                 [to_worker_r, from_worker_w, out_w, err_w])
        except OSError:
            for fd in ours:
                os.close(fd)
            raise WorkerStartError(f"the sandbox is gone: {self.sandbox.problem()}") from None
        finally:
            for fd in (to_worker_r, from_worker_w, out_w, err_w):
                os.close(fd)
        return WorkerProcess(self, request, to_worker_w, from_worker_r, out_r, err_r, limits)

    def warm(self) -> None:
        """Ask the zygote to warm up (see grader.inside.zygote); returns at once, its reply is read with the next."""
        with contextlib.suppress(OSError):
            self._send({"op": "warm"}, [])

    def call(self, message: dict[str, Any], *, timeout_s: float = 10.0) -> dict[str, Any] | None:
        """Send a request and wait for its reply; None when the zygote is gone or silent."""
        try:
            request = self._send(message, [])
        except OSError:
            return None
        return self.reply(request, timeout_s=timeout_s)

    def reply(self, request: int, *, timeout_s: float) -> dict[str, Any] | None:
        return control_request(self._socket, None, request, self._replies, timeout_s=timeout_s)

    def _send(self, message: dict[str, Any], fds: list[int]) -> int:
        self._requests += 1
        socket.send_fds(self._socket, [json.dumps({**message, "id": self._requests}).encode()], fds)
        return self._requests

    def close(self) -> None:
        """Hang up: the zygote then kills this submission's workers and everything they started."""
        self._socket.close()


def control_request(sock: socket.socket, message: dict[str, Any] | None, request: int,
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
        self.isolated = client.sandbox.isolated
        self.stdout = OutputTail(limits.output_bytes)
        self.stderr = OutputTail(limits.output_bytes)
        self._client = client
        self._request = request
        self._pid: int | None = None
        self._to_worker = to_worker
        os.set_blocking(to_worker, False)  # every write to the worker has a deadline (protocol.write_message)
        self._from_worker = from_worker
        self._ready = False
        self.hello: dict[str, Any] = {}  # what it says once ready (wait_ready)
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
            raise WorkerTimeout(tr("timed out after {seconds} s", seconds=f"{timeout_s:g}")) from None
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._death_reason()) from None
        return self._receive(deadline, timeout_s, self._last_id)

    @property
    def ready(self) -> bool:
        """Whether the worker said hello (`hello` holds what it said)."""
        return self._ready

    def wait_ready(self) -> dict[str, Any]:
        if self._ready:
            return self.hello
        from grader.inside.shared import protocol

        self._client.sandbox.check_self_test()
        try:  # no submission code has run yet: whatever goes wrong here is the sandbox's failure
            header, _ = self._receive(self.started_at + self.limits.start_timeout_s, self.limits.start_timeout_s, 0)
        except (WorkerGone, WorkerTimeout, protocol.ProtocolError) as problem:
            raise WorkerStartError(
                f"the grading worker could not start: {problem}. {self._client.sandbox.problem()}"
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
            raise WorkerTimeout(tr("timed out after {seconds} s", seconds=f"{timeout_s:g}")) from None
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
        return death_reason(status, self.limits)

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


def death_reason(status: dict[str, Any], limits: Limits) -> str:
    """How a worker died, in words: `status` is {"signal": n}, {"exit": code}, {"running": True} or {} (unknown)."""
    if not status:
        return tr("the worker was killed together with its sandbox")
    if status.get("running"):
        return tr("the worker closed its connection")
    if "signal" in status:
        name = signal.Signals(int(status["signal"])).name
        why = {
            "SIGSEGV": tr("a segmentation fault"),
            "SIGKILL": tr("killed, most often for running out of memory, starting over {tasks} threads or "
                          "creating over {inodes} files", tasks=limits.tasks, inodes=limits.inodes),
            "SIGXCPU": tr("over the {seconds} s CPU-time limit", seconds=limits.cpu_seconds),
            "SIGXFSZ": tr("over the {mib} MiB file-size limit", mib=limits.file_size_bytes // 2**20),
            "SIGABRT": tr("aborted"),
        }
        return tr("the worker crashed with {signal} ({why})", signal=name, why=why.get(name) or tr("a signal"))
    return tr("the worker exited with code {code}", code=status.get("exit"))


def _drain(fd: int, tail: OutputTail) -> None:
    with open(fd, "rb") as stream:
        for chunk in iter(lambda: stream.read1(65536), b""):
            tail.feed(chunk)
