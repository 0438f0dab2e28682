"""`zygote` imports torch once inside the sandbox and forks a fresh worker for each request.

Starting a worker then costs a fork, not a torch import. The zygote serves one client (one
submission) at a time; when the client hangs up it kills every process that submission left
behind and empties the sandbox's scratch folders, so the next submission starts clean. It never
imports submission code itself, and it is not dumpable, so a worker cannot ptrace it or read its
memory. Copied into the sandbox with the worker: standard library and torch only.

Messages are JSON over SOCK_SEQPACKET sockets (one message per datagram, so a writer killed
halfway cannot leave half a message), file descriptors ride along with SCM_RIGHTS.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import time
import traceback
from typing import Any

from . import processes

MAX_MESSAGE_BYTES = 65536
_PR_SET_DUMPABLE = 4
PRELOADED = ("protocol", "worker", "instrument", "probes", "capstone")


def main(config: dict[str, Any]) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    processes.become_subreaper()  # what a worker leaves behind comes back to us, to be killed
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)

    import torch

    torch.set_num_threads(1)
    for name in PRELOADED:
        importlib.import_module(f"{__package__}.{name}")
    sys.modules[f"{__package__}.protocol"].preflight()
    Zygote(socket.socket(fileno=config["control_fd"]), config.get("scratch", [])).run()


class Zygote:
    def __init__(self, control: socket.socket, scratch: list[str]) -> None:
        self.control = control
        self.scratch = scratch
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
                    self.clean_up()
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
            if op == "spawn" and len(fds) == 4:
                reply = {"pid": self.spawn(message, fds, client)}
            elif op == "kill":
                reply = {"killed": self.kill_everything()}
            elif op == "status":
                reply = {"status": self.status(int(message["pid"]), float(message.get("wait_s", 2.0)))}
            else:
                for fd in fds:
                    os.close(fd)
                reply = {"error": f"unknown request {op!r}"}
            _send(client, {"id": message.get("id"), **reply})
            if op == "spawn" and not self.warm:
                self.warm_up()

    def warm_up(self) -> None:
        """Pay once, here, what the first op count costs each worker (torch's dispatch machinery, ~1 s).

        Done after the first worker is forked, so that it does not delay grading's start; every
        later worker (the next submission's, or a restart) is forked warm.
        """
        self.warm = True
        torch = sys.modules["torch"]
        with contextlib.suppress(Exception):
            sys.modules[f"{__package__}.instrument"].count_ops(torch.add, [torch.zeros(2), 1], {})

    def spawn(self, request: dict[str, Any], fds: list[int], client: socket.socket) -> int:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.control.close()
                client.close()
                _become_worker(fds)
                worker = sys.modules[f"{__package__}.worker"]
                worker.serve(fds[0], fds[1], limits=request.get("limits", {}), threads=int(request.get("threads", 1)))
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
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
        """Kill every process below us: the worker and anything it started, setsid() or not."""
        me, killed = os.getpid(), 0
        for _ in range(100):
            targets = processes.descendants(me, processes.children_map())
            if not targets:
                break
            killed += len(targets)
            processes.kill_all(targets)
            self.reap()
            time.sleep(0.005)
        self.reap()
        return killed

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

    def clean_up(self) -> None:
        self.kill_everything()
        self.finished.clear()
        for folder in self.scratch:
            with contextlib.suppress(OSError):
                for entry in os.scandir(folder):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)


def _become_worker(fds: list[int]) -> None:
    """In the forked child: the four passed descriptors become the worker's pipes and stdio."""
    processes.die_with_parent(signal.SIGKILL)
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
