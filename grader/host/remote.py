"""`remote` lets trusted tests use the sandboxed submission as if it were ordinary PyTorch.

`impl.attention.attention(q, k, v)` sends a request to the worker and returns plain tensors;
objects that cannot travel (modules, classes, functions) stay in the worker and come back as
`Remote` handles. A crash, a timeout, a reply that breaks the protocol or an exception in student
code becomes an exception whose message is written for the student. A `Budget` (`grader check
--timeout`) bounds the whole run: each call gets at most what is left of it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.host.sandbox import Limits, WorkerGone, WorkerProcess, WorkerStartError, WorkerTimeout
from grader.inside.shared import TEST_MODULES, protocol

MAX_STRIKES = 2  # after this many crashes or timeouts in one function, stop calling it


class SubmissionFailure(AssertionError):
    """Student code failed: it raised, crashed, hung, or returned something that cannot travel.

    `file` names the submission file the error was raised in, where known, so that a failure
    inside masking.py while testing multi_head_attention can say "blocked by masking".
    """

    file: str | None = None


class NotImplementedYet(SubmissionFailure):
    """Student code raised NotImplementedError: the stub has not been filled in."""


class WorkerCrash(SubmissionFailure):
    """The worker died or hit a limit during a call; it is restarted for the next one."""


class BudgetExhausted(SubmissionFailure):
    """The whole run's time budget ran out before or during a call: the submission is not to blame."""


@dataclass
class Budget:
    """Wall-clock seconds for one submission's whole grading run, from `started_at` (time.monotonic)."""

    seconds: float
    started_at: float = field(default_factory=time.monotonic)
    used_up: bool = False  # set once it cut a call short, refused one, or stopped a test from running
    tests_not_run: int = 0

    def remaining(self) -> float:
        return self.started_at + self.seconds - time.monotonic()

    def spent(self) -> bool:
        return self.remaining() <= 0

    @property
    def message(self) -> str:
        """The words every test it stops carries, and the report's warning starts with."""
        return f"time budget of {self.seconds:g} s used up"


@dataclass
class Connection:
    """The trusted side's link to one worker; starts it lazily and again after every crash."""

    start: Callable[[], WorkerProcess]
    limits: Limits
    # Starts a worker in a fresh sandbox: tried once when a worker cannot start in the current one.
    restart: Callable[[], WorkerProcess] | None = None
    # Set once the sandbox failed twice: the run is then the grader's failure, not the submission's.
    sandbox_failure: str | None = None
    missing_files: frozenset[str] = frozenset()
    call_timeout_s: float | None = None
    budget: Budget | None = None
    process: WorkerProcess | None = None
    generation: int = 0
    _strikes: Counter[str] = field(default_factory=Counter)
    _broken_imports: dict[str, str] = field(default_factory=dict)
    # Modules and their attributes (functions, classes, sub-packages) are looked up once per worker:
    # each lookup is a round trip, and every test starts with a few. Their handles outlive release_all.
    _modules: dict[str, Remote] = field(default_factory=dict)
    _attributes: dict[tuple[int, str], Any] = field(default_factory=dict)
    _release_pending: bool = False

    def ensure_started(self) -> WorkerProcess:
        if self.process is None:
            return self._use(self.start())
        return self.process

    def _use(self, process: WorkerProcess) -> WorkerProcess:
        """Take a new worker into use: the handles of the previous one mean nothing to it."""
        self.process = process
        self.generation += 1
        self._modules.clear()
        self._attributes.clear()
        self._release_pending = False
        return process

    def close(self, *, wait: bool = True) -> None:
        """Kill the worker; without `wait` only ask the zygote to (the caller kills the whole sandbox next)."""
        if self.process is not None:
            self.process.kill(wait=wait)
            self.process = None

    def output_marks(self) -> tuple[int, int]:
        process = self.ensure_started()
        return process.stdout.mark(), process.stderr.mark()

    def printed_since(self, marks: tuple[int, int]) -> str:
        if self.process is None:
            return ""
        out, err = self.process.stdout.since(marks[0]), self.process.stderr.since(marks[1])
        return (out + err).strip()

    # --- requests ------------------------------------------------------------------------------

    def request(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *, what: str) -> Any:
        per_call = self.call_timeout_s or self.limits.call_timeout_s
        left = self.budget.remaining() if self.budget is not None else math.inf
        if self.budget is not None and left <= 0:
            self.budget.used_up = True
            raise BudgetExhausted(f"{self.budget.message} before {what} was called: this test was not finished")
        if self._strikes[what] >= MAX_STRIKES:
            raise WorkerCrash(f"{what} was not called again: it already crashed or timed out {MAX_STRIKES} times")
        process = self._ready_worker()
        if self._release_pending:  # the previous test's objects go with this request, not in a round trip of their own
            header = {**header, "release_first": self._kept_handles()}
            self._release_pending = False
        timeout = min(per_call, left)
        try:
            reply, reply_tensors = process.exchange(header, tensors, timeout_s=timeout)
        except WorkerTimeout as problem:
            if self.budget is not None and timeout < per_call:
                # The run's budget, not this function, ran out: no strike, and no talk of endless loops.
                self._lost(what, strike=False)
                self.budget.used_up = True
                raise BudgetExhausted(
                    f"{self.budget.message} while {what} was running: the grader stopped it {timeout:.3g} s into "
                    f"the call (under the {per_call:g} s per-call limit), and the tests left were not run"
                ) from None
            self._lost(what)
            raise WorkerCrash(f"{problem} in {what}: look for an endless loop; the worker was restarted") from None
        except WorkerGone as problem:
            self._lost(what)
            raise WorkerCrash(f"{problem} in {what}; the worker was restarted{self._stderr_tail(process)}") from None
        except protocol.ProtocolError as error:  # exchange killed the worker: no later reply can answer anything
            raise self._broke_protocol(what, error) from None
        if not reply["ok"]:
            raise _failure(reply["error"], what, self.limits)
        decoder = protocol.Decoder(reply_tensors, self._remote, place=_place)
        try:
            return decoder.decode(reply["value"])
        except protocol.ProtocolError as error:
            raise self._broke_protocol(what, error) from None

    def _broke_protocol(self, what: str, error: protocol.ProtocolError) -> WorkerCrash:
        """A reply the grader cannot take (forged, stale, malformed): only code in the worker writes one."""
        self._lost(what)
        return WorkerCrash(f"{what} broke the grader's protocol ({error}): the worker was restarted")

    def _ready_worker(self) -> WorkerProcess:
        """A worker that said hello; one that cannot start is retried once in a fresh sandbox."""
        if self.sandbox_failure is not None:
            raise WorkerStartError(self.sandbox_failure)
        for attempt in (1, 2):
            process = self.ensure_started()
            try:
                process.wait_ready()
                return process
            except WorkerStartError as problem:
                process.kill()
                self.process = None
                if attempt == 2 or self.restart is None:
                    self.sandbox_failure = str(problem)
                    raise
                self._use(self.restart())
        raise AssertionError("unreachable")

    def _lost(self, what: str, *, strike: bool = True) -> None:
        if strike:
            self._strikes[what] += 1
        if self.process is not None:
            self.process.kill()
        self.process = None

    def _stderr_tail(self, process: WorkerProcess) -> str:
        tail = process.stderr.since(0).strip()
        if not tail:
            return ""
        lines = tail.splitlines()[-8:]
        return "\nLast lines on stderr:\n" + "\n".join(lines)

    def _remote(self, value: dict[str, Any]) -> Remote:
        # The Decoder checked that the handle is an int and the type and kind strings.
        name = value.get("type", "object")[:200].rsplit(".", 1)[-1]
        return Remote(self, value["$handle"], self.generation, name, value.get("kind", "object"))

    def encode(self, args: Any) -> tuple[Any, dict[str, torch.Tensor]]:
        def on_object(obj: Any) -> dict[str, Any]:
            if isinstance(obj, Remote):
                obj._check_alive()
                return {"$handle": obj._handle}
            raise TypeError(f"a {type(obj).__name__} cannot be sent to the submission: build it there instead")

        encoder = protocol.Encoder(on_object)
        return encoder.encode(args), encoder.tensors

    # --- what tests use ------------------------------------------------------------------------

    def import_module(self, name: str) -> Remote:
        what = f"importing {name}" if name == "torch" or name in TEST_MODULES else f"importing {name}.py"
        if name in self._broken_imports:
            raise SubmissionFailure(self._broken_imports[name])
        if f"{name}.py" in self.missing_files:
            raise SubmissionFailure(f"{name}.py was not found in the submission")
        self.ensure_started()
        if name in self._modules:
            return self._modules[name]
        try:
            module = self.request({"op": "import", "name": name}, {}, what=what)
        except BudgetExhausted:
            raise  # the import itself may be fine: nothing to remember
        except SubmissionFailure as failure:
            self._broken_imports[name] = str(failure)
            raise
        if isinstance(module, Remote):
            self._modules[name] = module
        return module

    def module_attribute(self, module: Remote, name: str) -> Any:
        """`module.name`, asked of the worker once: a module's functions and classes are what tests look up."""
        key = (module._handle, name)
        if key not in self._attributes:
            self._attributes[key] = self.request(
                {"op": "getattr", "target": module._handle, "name": name}, {}, what=f"{module._name}.{name}"
            )
        return self._attributes[key]

    def call(self, target: Remote, args: tuple[Any, ...], kwargs: dict[str, Any], *, mode: str = "plain",
             **extra: Any) -> Any:
        payload, tensors = self.encode({"args": list(args), "kwargs": kwargs, **extra})
        header = {"op": "call", "target": target._handle, "mode": mode}
        # The encoded dict is {"$dict": [[key, value], ...]}; the worker wants the fields flat.
        header.update({key: value for key, value in payload["$dict"]})
        return self.request(header, tensors, what=f"{target._name}()")

    def release_all(self) -> None:
        """Let the worker drop every object the trusted side holds a handle on, but modules and their attributes.

        Sent with the next request rather than on its own: one round trip fewer for each test.
        """
        self._release_pending = self.process is not None

    def _kept_handles(self) -> list[int]:
        kept = [*self._modules.values(), *self._attributes.values()]
        return sorted({value._handle for value in kept if isinstance(value, Remote)})


class Remote:
    """A handle on an object that lives in the worker; attribute access and calls go there."""

    __slots__ = ("_connection", "_generation", "_handle", "_kind", "_name")

    def __init__(self, connection: Connection, handle: int, generation: int, name: str, kind: str) -> None:
        self._connection = connection
        self._handle = handle
        self._generation = generation
        self._name = name
        self._kind = kind

    def _check_alive(self) -> None:
        if self._generation != self._connection.generation or self._connection.process is None:
            raise WorkerCrash(f"{self._name} was lost when the worker restarted after an earlier failure")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._check_alive()
        if self._kind == "package":
            value = self._connection.module_attribute(self, name)
        else:
            value = self._connection.request(
                {"op": "getattr", "target": self._handle, "name": name}, {}, what=f"{self._name}.{name}"
            )
        if isinstance(value, Remote) and value._kind in ("callable", "class", "package"):
            value._name = f"{self._name}.{name}"
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._check_alive()
        return self._connection.call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<{self._name} in the sandboxed submission>"


class RemoteSubmission:
    """The `impl` fixture: `impl.attention` is the submission's attention.py, imported in the worker."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Remote:
        if name.startswith("_"):
            raise AttributeError(name)
        module = self._connection.import_module(name)
        module._name = name
        return module

    def __repr__(self) -> str:
        return "<the sandboxed submission>"


def _place(tensor: torch.Tensor, device: str, requires_grad: bool) -> torch.Tensor:
    device = protocol.parse_device(device)
    if device != "cpu" and not torch.cuda.is_available():
        raise protocol.ProtocolError(f"a tensor arrived on {device}, but this process has no CUDA")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise protocol.ProtocolError(f"a tensor arrived on {device}, a GPU this machine does not have")
    return tensor.to(device)


def _failure(error: Any, what: str, limits: Limits) -> SubmissionFailure:
    failure = _describe_failure(error, what, limits)
    where = error.get("where") if isinstance(error, dict) else None
    if isinstance(where, dict) and isinstance(where.get("file"), str):
        failure.file = where["file"]
    return failure


def _describe_failure(error: Any, what: str, limits: Limits) -> SubmissionFailure:
    if not isinstance(error, dict):
        return SubmissionFailure(f"{what} failed")
    kind = str(error.get("type", "Exception"))
    message = str(error.get("message", ""))[:1000]
    where = error.get("where")
    location = ""
    if isinstance(where, dict) and where.get("file"):
        location = f" ({where['file']}, line {where.get('line')}"
        location += f": {str(where['code'])[:160]})" if where.get("code") else ")"
    if kind == "NotImplementedError":
        detail = f": {message}" if message else ""
        return NotImplementedYet(f"{what} is not implemented yet{detail}")
    if kind == "ProtocolError":
        return SubmissionFailure(f"{what} returned something that cannot leave the sandbox: {message}")
    if kind in ("MemoryError",) or "can't allocate memory" in message or "not enough memory" in message:
        return SubmissionFailure(
            f"{what} ran out of memory: the submission may use {limits.memory_bytes / 2**30:g} GiB{location}"
        )
    if kind == "ModuleNotFoundError" and what.startswith("importing"):
        return SubmissionFailure(f"{what} failed: {message}{location}")
    if kind in ("SyntaxError", "IndentationError", "TabError"):
        return SubmissionFailure(f"{what} failed: {kind}: {message}{location}")
    return SubmissionFailure(f"{what} raised {kind}: {message}{location}")
