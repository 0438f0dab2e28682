"""`zygote` imports torch once inside the sandbox and forks a fresh worker for each request.

Starting a worker then costs a fork, not a torch import. The zygote serves one client (one
submission) at a time; when the client hangs up it kills the workers it forked for it. It never
imports submission code itself, it is not dumpable, and each worker it forks is confined
(`confine`) before any submission code runs: a worker can neither trace, read nor signal it. It is
nevertheless not trusted to clean up: between two submissions the trusted side kills whatever is
left from the host's view of the processes, empties the scratch folders and checks the zygote's
health (`grader.host.sandbox.Sandbox.recycle`). Copied into the sandbox with the worker: standard library, torch
and libseccomp's bindings only.

At start, before importing torch, it runs `confine.self_test` and sends the outcome as its first
message, so that the trusted side can refuse a sandbox that does not hold on this machine.

Messages are JSON over SOCK_SEQPACKET sockets (one message per datagram, so a writer killed
halfway cannot leave half a message), file descriptors ride along with SCM_RIGHTS.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import pkgutil
import signal
import socket
import sys
import time
import traceback
from typing import Any

from . import confine
from .shared import libseccomp, processes

MAX_MESSAGE_BYTES = 65536


def main(config: dict[str, Any]) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    processes.become_subreaper()  # what a worker leaves behind comes back to us, to be killed
    processes.undumpable()
    if config.get("home"):  # outside bubblewrap: the scratch folder, named only now that we are undumpable
        os.chdir(config["home"])
        os.environ["HOME"] = os.environ["TMPDIR"] = config["home"]
    control = socket.socket(fileno=config["control_fd"])
    confined = bool(config.get("confine"))
    problem = libseccomp.available()
    fence = config.get("fence")  # Landlock, outside bubblewrap
    fenced = confine.fence(fence["read"], fence["write"]) if fence else None
    if problem is None:
        outcomes = confine.self_test(confine.installation_of("torch"), secrets=config.get("secrets", []),
                                     grader=config.get("grader"))
    else:
        outcomes = {"confine the workers": f"ALLOWED ({problem})"}
    if fenced is not None:
        outcomes["keep to its own files"] = f"ALLOWED ({fenced})"
    _send(control, {"id": 0, "self_test": outcomes})
    # In the bubblewrap tier a sandbox that failed its self-test forks no worker, whatever it is asked:
    # the trusted side reads the outcome only when it first waits for a worker, not before.
    allowed = [what for what, outcome in outcomes.items() if outcome.startswith("ALLOWED")]
    refusal = f"the sandbox failed its self-test: {'; '.join(allowed)}" if allowed and config.get("strict") else None

    import torch

    torch.set_num_threads(1)
    for module in pkgutil.walk_packages(sys.modules[__package__].__path__, f"{__package__}."):
        importlib.import_module(module.name)  # the whole staged package, so that a fork imports nothing
    sys.modules[f"{__package__}.shared.protocol"].preflight()
    Zygote(control, confined=confined and problem is None, refusal=refusal).run()


class Zygote:
    def __init__(self, control: socket.socket, *, confined: bool, refusal: str | None) -> None:
        self.control = control
        self.confined = confined
        self.refusal = refusal
        self.children: set[int] = set()
        self.finished: dict[int, dict[str, int]] = {}
        self.warm = False

    def run(self) -> None:
        while True:
            message, fds = _receive(self.control)
            if message is None:
                return  # the trusted side hung up: the sandbox ends with us
            if message.get("op") == "client" and len(fds) == 1:
                client = socket.socket(fileno=fds[0])
                try:
                    self.serve(client)
                finally:
                    client.close()
                    self.kill_everything()
                    self.finished.clear()
            else:
                for fd in fds:
                    os.close(fd)
            if message.get("op") == "sync":
                _send(self.control, {"id": message.get("id"), "idle": True})

    def serve(self, client: socket.socket) -> None:
        while True:
            message, fds = _receive(client)
            if message is None:
                return
            op = message.get("op")
            if op == "spawn" and len(fds) == 4 and self.refusal is None:
                reply = {"pid": self.spawn(message, fds, client)}
            elif op == "warm":
                reply = {"warm": True}
            elif op == "kill":
                reply = {"killed": self.kill_everything()}
            elif op == "status":
                reply = {"status": self.status(int(message["pid"]), float(message.get("wait_s", 2.0)))}
            else:
                for fd in fds:
                    os.close(fd)
                reply = {"error": f"unknown request {op!r}"}
            _send(client, {"id": message.get("id"), **reply})
            if op == "warm" and not self.warm:
                self.warm_up()

    def warm_up(self) -> None:
        """Pay once, here, what the first fake tensor costs each worker (~1 s, torch._dynamo's imports).

        Done when the trusted side asks ("warm"), which it does once it has collected tests that need it
        (grader.judge.plugin's warm_worker): most runs have none, and the second a warm-up takes is a core's
        second. It is asked for after the first worker is forked, so it does not delay grading's start; every
        later worker (a restart, the next submission's) is forked warm and says so in its hello, and the tests
        that use fake tensors run last, in such a worker.
        """
        self.warm = True
        torch = sys.modules["torch"]
        with contextlib.suppress(Exception):
            sys.modules[f"{__package__}.shared.instrument"].count_ops(torch.add, [torch.zeros(2), 1], {})
        with contextlib.suppress(Exception):  # fake tensors' first use (~1.5 s): the suites' device tests
            sys.modules[f"{__package__}.shared.probes"].on_another_device(torch.neg, {"shape": [2], "dtype": "float32"})

    def spawn(self, request: dict[str, Any], fds: list[int], client: socket.socket) -> int:
        limits = dict(request.get("limits", {}))
        above = request.get("address_space_above_zygote")
        if isinstance(above, int) and above > 0:
            limits["RLIMIT_AS"] = _address_space() + above
        budget = request.get("data_above_zygote")  # a test's memory budget (grader.judge.plugin's memory_budget)
        if isinstance(budget, int) and budget > 0:
            limits["RLIMIT_DATA"] = min(limits.get("RLIMIT_DATA", 2**62), _data_size() + budget)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.control.close()
                client.close()
                _become_worker(fds, confined=self.confined)
                if isinstance(budget, int) and budget > 0:
                    _live_memory_only()
                worker = sys.modules[f"{__package__}.worker"]
                worker.serve(fds[0], fds[1], limits=limits, threads=int(request.get("threads", 1)))
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        return pid

    def status(self, pid: int, wait_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + wait_s
        while pid not in self.finished:
            self.reap()
            if pid in self.finished or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return self.finished.get(pid, {"running": True})

    def kill_everything(self) -> int:
        """Kill every worker forked for this client (a confined worker cannot start processes of its own)."""
        self.reap()
        alive = sorted(self.children - set(self.finished))
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.reap()
        self.children.clear()
        return len(alive)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFSIGNALED(status):
                self.finished[pid] = {"signal": os.WTERMSIG(status)}
            else:
                self.finished[pid] = {"exit": os.waitstatus_to_exitcode(status)}


def _live_memory_only() -> None:
    """Under a memory budget, the worker's data is what it holds: each allocation over 128 KiB gets a mapping of its
    own, returned to the system when freed. By default glibc raises that threshold once a large block is freed, and
    later blocks come from the heap, where one small tensor still alive pins what was freed below it: a correct loop
    over blocks of queries (128 x T scores each) grew 12 MiB a block under RLIMIT_DATA, holding a few MiB."""
    with contextlib.suppress(Exception):  # not glibc (musl, macOS): its allocator is what it is
        ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD; setting it stops the threshold moving


def _become_worker(fds: list[int], *, confined: bool) -> None:
    """In the forked child: the four passed descriptors become the worker's pipes and stdio, then the lock."""
    processes.die_with_parent(signal.SIGKILL)
    os.setsid()  # its own process group: nothing it does to "its group" reaches the zygote
    for name in ("SIGINT", "SIGTERM", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    fd_in, fd_out, out, err = fds
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    keep = {0, 1, 2, fd_in, fd_out}
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))
    if confined:
        confine.confine_worker()


def _data_size() -> int:
    """This process's private writable memory in bytes, as RLIMIT_DATA counts it (what a forked worker starts with)."""
    with open("/proc/self/status", encoding="utf-8") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData:"))


def _address_space() -> int:
    """This process's mapped address space in bytes (what a forked worker starts with)."""
    with open("/proc/self/statm", encoding="utf-8") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    try:
        data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 8)
    except (ConnectionError, OSError):
        return None, []
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        message = json.loads(data)
    except ValueError:
        message = {}
    return (message if isinstance(message, dict) else {}), list(fds)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        sock.send(json.dumps(message).encode())
