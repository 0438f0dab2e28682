"""`connection` is the trusted side's link to one submission's worker: requests, restarts, strikes, a time budget.

A crash, a timeout, a reply that breaks the protocol or an exception in student code becomes a
`SubmissionFailure` (see `failures`); objects that cannot travel come back as `Remote` handles.
A `Budget` bounds the whole run: each call gets at most what is left of it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.host.backend import WorkerHandle
from grader.host.failures import Budget, BudgetExhausted, SubmissionFailure, WorkerCrash, submission_failure
from grader.host.limits import Limits, WorkerGone, WorkerStartError, WorkerTimeout
from grader.host.remote import Remote
from grader.inside.shared import TEST_MODULES, protocol
from grader.lang import tr

MAX_STRIKES = 2  # after this many crashes or timeouts in one function, stop calling it


@dataclass
class Connection:
    """The trusted side's link to one worker; starts it lazily and again after every crash."""

    start: Callable[..., WorkerHandle]  # start(memory_above=None): a worker, bounded by a test's budget where given
    limits: Limits
    # Starts a worker in a fresh sandbox: tried once when a worker cannot start in the current one.
    restart: Callable[..., WorkerHandle] | None = None
    # Set once the sandbox failed twice: the run is then the grader's failure, not the submission's.
    sandbox_failure: str | None = None
    missing_files: frozenset[str] = frozenset()
    # exercise files made from notebook cells that do not parse: file -> the one line that names the cell and line
    unparsed_files: dict[str, str] = field(default_factory=dict)
    # exercise module -> the exercise modules its top level imports (grader.intake.imports): imported first, each once
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    call_timeout_s: float | None = None
    # Bytes the next worker's memory may grow above its zygote's (a test's memory_budget); None: the limits' own.
    memory_above: int | None = None
    budget: Budget | None = None
    process: WorkerHandle | None = None
    generation: int = 0
    _strikes: Counter[str] = field(default_factory=Counter)
    _broken_imports: dict[str, SubmissionFailure] = field(default_factory=dict)  # raised again, as it was
    # Modules and their attributes (functions, classes, sub-packages) are looked up once per worker:
    # each lookup is a round trip, and every test starts with a few. Their handles outlive release_all.
    _modules: dict[str, Remote] = field(default_factory=dict)
    _attributes: dict[tuple[int, str], Any] = field(default_factory=dict)
    _release_pending: bool = False
    _importing: set[str] = field(default_factory=set)  # exercise modules whose imports are being imported first
    _import_roots: dict[str, tuple[str, str]] = field(default_factory=dict)  # module -> the file that failed, and how
    # The worker's seed for the test that starts (grader.host.seeds), sent with its next request, not in a round
    # trip of its own; kept across a restart, so that a new worker is seeded too.
    seed_pending: int | None = None

    def ensure_started(self) -> WorkerHandle:
        """The worker in use, or a new one; a sandbox that is gone before a worker can be asked of it is replaced
        once, as `_ready_worker` replaces one whose worker cannot start, and then the run is the grader's failure."""
        if self.process is not None:
            return self.process
        if self.sandbox_failure is not None:
            raise WorkerStartError(self.sandbox_failure)
        try:
            return self._use(self.start(memory_above=self.memory_above))
        except WorkerStartError as problem:
            if self.restart is None:
                self.sandbox_failure = str(problem)
                raise
        try:
            return self._use(self.restart(memory_above=self.memory_above))
        except WorkerStartError as problem:
            self.sandbox_failure = str(problem)
            raise

    def _use(self, process: WorkerHandle) -> WorkerHandle:
        """Take a new worker into use: the handles of the previous one mean nothing to it."""
        self.process = process
        self.generation += 1
        self._modules.clear()
        self._attributes.clear()
        self._release_pending = False
        return process

    def worker_warm(self) -> bool:
        """Whether the worker in use says it was forked once its sandbox had warmed up (see grader.inside.zygote).

        The worker's own word, used only to decide where a test runs: a worker that lies makes its own run slower.
        """
        process = self.process
        return process is not None and process.ready and process.hello.get("warm") is True

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

    def request(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *, what: str,
                importing: bool = False) -> Any:
        per_call = self.call_timeout_s or self.limits.call_timeout_s
        left = self.budget.remaining() if self.budget is not None else math.inf
        if self.budget is not None and left <= 0:
            self.budget.used_up = True
            raise BudgetExhausted(tr("{budget} before {what} was called: this test was not finished",
                                     budget=self.budget.message, what=what))
        if self._strikes[what] >= MAX_STRIKES:
            raise WorkerCrash(tr("{what} was not called again: it already crashed or timed out {count} times",
                                 what=what, count=MAX_STRIKES))
        process = self._ready_worker()
        if self._release_pending:  # the previous test's objects go with this request, not in a round trip of their own
            header = {**header, "release_first": self._kept_handles()}
            self._release_pending = False
        if self.seed_pending is not None:
            header = {**header, "seed_first": self.seed_pending}
            self.seed_pending = None
        timeout = min(per_call, left)
        try:
            reply, reply_tensors = process.exchange(header, tensors, timeout_s=timeout)
        except WorkerTimeout as problem:
            if self.budget is not None and timeout < per_call:
                # The run's budget, not this function, ran out: no strike, and no talk of endless loops.
                self._lost(what, strike=False)
                self.budget.used_up = True
                raise BudgetExhausted(tr(
                    "{budget} while {what} was running: the grader stopped it {seconds} s into the call (under the "
                    "{limit} s per-call limit), and the tests left were not run", budget=self.budget.message,
                    what=what, seconds=f"{timeout:.3g}", limit=f"{per_call:g}")) from None
            self._lost(what)
            crash = WorkerCrash(tr("{problem} in {what}: look for an endless loop; the worker was restarted",
                                   problem=problem, what=what)).caused("timeout")
            crash.names_its_cause = importing  # the import itself hung: a test's hint about values would mislead
            raise crash from None
        except WorkerGone as problem:
            self._lost(what)
            crash = WorkerCrash(tr("{problem} in {what}; the worker was restarted", problem=problem, what=what)
                                + self._stderr_tail(process)).caused("crash")
            crash.names_its_cause = importing
            raise crash from None
        except protocol.ProtocolError as error:  # exchange killed the worker: no later reply can answer anything
            raise self._broke_protocol(what, error) from None
        if not reply["ok"]:
            raise submission_failure(reply["error"], what, self.limits, importing=importing,
                                     memory_above=self.memory_above)
        decoder = protocol.Decoder(reply_tensors, self._remote, place=_place)
        try:
            return decoder.decode(reply["value"])
        except protocol.ProtocolError as error:
            raise self._broke_protocol(what, error) from None

    def _broke_protocol(self, what: str, error: protocol.ProtocolError) -> WorkerCrash:
        """A reply the grader cannot take (forged, stale, malformed): only code in the worker writes one."""
        self._lost(what)
        return WorkerCrash(tr("{what} broke the grader's protocol ({error}): the worker was restarted", what=what,
                              error=error))

    def _ready_worker(self) -> WorkerHandle:
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
                self._use(self.restart(memory_above=self.memory_above))
        raise AssertionError("unreachable")

    def _lost(self, what: str, *, strike: bool = True) -> None:
        if strike:
            self._strikes[what] += 1
        if self.process is not None:
            self.process.kill()
        self.process = None

    def _stderr_tail(self, process: WorkerHandle) -> str:
        tail = process.stderr.since(0).strip()
        if not tail:
            return ""
        lines = tail.splitlines()[-8:]
        return "\n" + tr("Last lines on stderr:") + "\n" + "\n".join(lines)

    def _remote(self, value: dict[str, Any]) -> Remote:
        # The Decoder checked that the handle is an int and the type and kind strings.
        name = value.get("type", "object")[:200].rsplit(".", 1)[-1]
        return Remote(self, value["$handle"], self.generation, name, value.get("kind", "object"))

    def encode(self, args: Any) -> tuple[Any, dict[str, torch.Tensor]]:
        def on_object(obj: Any) -> dict[str, Any]:
            if isinstance(obj, Remote):
                obj._check_alive()
                return {"$handle": obj._resolved()._handle}
            raise TypeError(f"a {type(obj).__name__} cannot be sent to the submission: build it there instead")

        encoder = protocol.Encoder(on_object)
        return encoder.encode(args), encoder.tensors

    # --- what tests use ------------------------------------------------------------------------

    def import_module(self, name: str) -> Remote:
        exercise_file = name != "torch" and name not in TEST_MODULES
        what = tr("importing {name}", name=f"{name}.py" if exercise_file else name)
        if name in self._broken_imports:
            raise self._broken_imports[name].again()
        if f"{name}.py" in self.unparsed_files:  # the notebook's cell, never a file the student does not have
            raise SubmissionFailure(self.unparsed_files[f"{name}.py"]).caused(f"import:{name}.py")
        if f"{name}.py" in self.missing_files:
            raise SubmissionFailure(tr("{file} was not found in the submission", file=f"{name}.py")).caused(
                f"missing:{name}.py", f"import:{name}.py")
        self.ensure_started()
        if name in self._modules:
            return self._modules[name]
        if exercise_file and name not in self._importing:
            self._import_first(name)
        try:
            module = self.request({"op": "import", "name": name}, {}, what=what, importing=exercise_file)
        except BudgetExhausted:
            raise  # the import itself may be fine: nothing to remember
        except SubmissionFailure as failure:
            if exercise_file:
                failure = self._too_deep_to_parse(name, failure).caused(f"import:{name}.py")
            self._broken_imports[name] = failure
            raise failure from None
        if isinstance(module, Remote):
            self._modules[name] = module
        return module

    def _too_deep_to_parse(self, name: str, failure: SubmissionFailure) -> SubmissionFailure:
        """A MemoryError or RecursionError importing a file this side could not parse either (`exercise_imports` left
        it out) is Python's parser giving up on code nested too deeply, not the submission's memory or recursion."""
        if failure.kind not in ("MemoryError", "RecursionError") or name in self.imports:
            return failure
        deep = SubmissionFailure(tr("importing {file} failed: Python cannot parse it, its code is nested too deeply "
                                    "({kind} in the parser)", file=f"{name}.py", kind=failure.kind))
        deep.file, deep.kind, deep.names_its_cause = f"{name}.py", failure.kind, True
        return deep

    def _import_first(self, name: str) -> None:
        """Import, one at a time and first, the exercise files `name` imports: one that failed (an endless loop at its
        top level, say) then fails `name` at once, saying so, instead of running again inside it. A file missing or
        unparsed is left to `name`'s own import, which says so as before."""
        self._importing.add(name)
        try:
            for dependency in self.imports.get(name, ()):
                file = f"{dependency}.py"
                if (dependency in self._importing or dependency in self._modules or file in self.missing_files
                        or file in self.unparsed_files):
                    continue
                try:
                    self.import_module(dependency)
                except BudgetExhausted:
                    raise
                except SubmissionFailure as failure:
                    if dependency not in self._broken_imports:
                        raise
                    root, problem = self._import_roots.get(dependency, (f"{dependency}.py", str(failure)))
                    blocked = SubmissionFailure(tr("{file} was not imported, as it needs {other}: {problem}",
                                                   file=f"{name}.py", other=root, problem=problem))
                    blocked.caused(*failure.causes, f"import:{name}.py")
                    blocked.file, blocked.names_its_cause = failure.file or root, True
                    self._broken_imports[name], self._import_roots[name] = blocked, (root, problem)
                    raise blocked.again() from None
        finally:
            self._importing.discard(name)

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
        if target._method is not None:  # a module's method: looked up by the call itself, not a round trip before
            header["method"] = target._method
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


def _place(tensor: torch.Tensor, device: str, requires_grad: bool) -> torch.Tensor:
    device = protocol.parse_device(device)
    if device != "cpu" and not torch.cuda.is_available():
        raise protocol.ProtocolError(f"a tensor arrived on {device}, but this process has no CUDA")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise protocol.ProtocolError(f"a tensor arrived on {device}, a GPU this machine does not have")
    return tensor.to(device)
