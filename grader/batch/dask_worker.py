"""`dask_worker` is what a cluster batch (`cluster`) runs on each Dask worker: the check that the worker may grade
the batch (`describe`), the plugin that keeps its warm slots (`SlotPlugin`), and the task that grades one
submission in one of them (`grade_on_worker`). Every worker imports it from its own kit."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import queue
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from grader import sources
from grader.batch.jobs import Isolation, Job, Outcome, Status
from grader.grade.selection import Selection, select
from grader.kit import VERSION, kit_root
from grader.lang import tr

try:
    from distributed import WorkerPlugin
except ImportError:  # `dask_client.require_distributed` says what to install before anything here is used
    WorkerPlugin = object  # type: ignore[misc,assignment]

SLOT_MARGIN_S = 60  # past a submission's budget, how long a worker waits for its slot before replacing it
IDLE_S = 900.0  # a worker's slots unused this long are closed (see `SlotPlugin._close_when_idle`)
STARTED = "attention-kit-started"  # the Dask event a grading task logs as it starts (see `cluster._Dispatch`)


def fingerprint(selection: Selection) -> str:
    """What a worker's kit must match: what decides a grade or a word of feedback. The kit's version and torch's,
    the suites this batch runs, and the kit's sources (`grader.sources`: the grader, the solutions and their
    catalogue, the translations, the files staged beside every submission; not the release's translated stubs, so
    that a checkout and the autograder bundle built from it grade together)."""
    digest = hashlib.sha256(f"{VERSION}|{_torch()}|{selection.suite}|{','.join(selection.exercises)}".encode())
    root = kit_root()
    for path in sorted(selection.files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    digest.update(sources.digest(root).encode())
    return digest.hexdigest()


def _torch() -> str:
    """The installed torch's version, without importing it (the batch's own process never does)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return ""


def describe(exercises: list[str], suite: str, expected: str, isolation: Isolation) -> dict[str, str]:
    """Run on each worker (`Client.run`): its kit version, and why it cannot grade this batch ("" when it can)."""
    from grader.host import portable, tiers

    problem = ""
    try:
        if portable.wanted():  # a slot forks from a zygote: Linux's, see grader.host.portable
            problem = tr("it spawns its workers ({why}), and grader batch grades on Linux only", why=portable.reason())
        elif fingerprint(select(exercises, suite)) != expected:
            problem = tr("its kit differs from this one (version {version}, or its grader, solutions, suites or "
                         "torch): install the same kit on it", version=VERSION)
        else:
            tier = tiers.refuse_unless_isolated(why=isolation.protect, allowed=isolation.allow_unisolated,
                                                wanted=isolation.sandbox).tier
    except Exception as error:  # a usage refusal (no isolation, Python unreachable) or a broken install
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
    return {"version": VERSION, "problem": problem, "tier": "" if problem else tier}


class SlotPlugin(WorkerPlugin):
    """A Dask worker plugin: warm slots on each worker that runs this batch's kit (see the module's docstring)."""

    def __init__(self, name: str, expected: str, exercises: list[str], suite: str, device: str,
                 isolation: Isolation) -> None:
        self.name = name
        self.resource = name  # what each grading task needs one of: only this plugin's slots offer it
        self.expected = expected
        self.exercises = exercises
        self.suite = suite
        self.device = device
        self.isolation = isolation
        self.refused = ""
        self._folder: Path | None = None  # set up on the worker (so is all below): the plugin travels as data

    async def setup(self, worker: Any) -> None:
        from grader.batch.slot_process import Slot
        from grader.host.scratch import remove_stale_stages

        self._slots: queue.Queue[Any] = queue.Queue()
        self._started: list[Any] = []

        state = describe(self.exercises, self.suite, self.expected, self.isolation)
        if state["problem"]:  # no slots, no resource: the scheduler never sends this worker a submission
            self.refused = state["problem"]
            logging.getLogger("grader.cluster").error("grader: not grading on worker %s: %s", worker.address,
                                                      self.refused)
            return
        remove_stale_stages()
        self._folder = Path(tempfile.mkdtemp(prefix=f"grader-cluster-{os.getpid()}-"))
        self._folder.chmod(0o711)  # crossed, never listed, by bubblewrap running as uid 65534
        (self._folder / "stage").mkdir(mode=0o711)
        (self._folder / "reports").mkdir(mode=0o700)
        for _ in range(max(1, worker.state.nthreads)):
            slot = Slot(self.device, self._folder / "stage")
            self._started.append(slot)
            self._slots.put(slot)
        await worker.set_resources(**{self.resource: len(self._started)})
        self._used_at = time.monotonic()
        self._idle = asyncio.ensure_future(self._close_when_idle(worker))

    async def _close_when_idle(self, worker: Any) -> None:
        """Close the slots once none has graded for IDLE_S: a batch unregisters its plugin when it ends, but a batch
        killed outright cannot, and its slots would hold their sandboxes until the worker stops."""
        while self._started:
            await asyncio.sleep(IDLE_S / 10)
            if self._slots.qsize() == len(self._started) and time.monotonic() - self._used_at > IDLE_S:
                await self.teardown(worker)

    async def teardown(self, worker: Any) -> None:
        if not getattr(self, "_started", None):
            return
        started, self._started = self._started, []
        with contextlib.suppress(Exception):
            await worker.set_resources(**{self.resource: 0})
        for slot in started:  # each waits up to 10 s for its slot to stop: not on the worker's event loop
            with contextlib.suppress(Exception):
                await asyncio.to_thread(slot.close)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def grade(self, job: dict[str, Any]) -> str:
        """Grade one submission in a free slot; the outcome and the report, as JSON text."""
        if self._folder is None:  # never sent here: only the workers it accepted offer the resource the task needs
            raise RuntimeError(tr("this worker refused the batch: {problem}", problem=self.refused))
        slot = self._slots.get()
        self._used_at = time.monotonic()
        partial = Path(tempfile.mkdtemp(dir=self._folder / "reports")) / "report.json"
        try:
            # Other submissions' reports: the stages beside them are for uid 65534 to cross (0711), as a local
            # batch's are, and each sandbox sees only its own.
            secrets = [*self.isolation.secrets, str(self._folder / "reports")]
            graded = Job(**{**job, "report": str(partial),
                            "isolation": Isolation(secrets, self.isolation.protect, self.isolation.allow_unisolated)})
            outcome = slot.grade(graded, timeout_s=graded.timeout_s + SLOT_MARGIN_S)
            report = partial.read_text(encoding="utf-8") if outcome.status == Status.GRADED else "null"
        except OSError:
            outcome, report = Outcome(Status.FAILED, tr("the report is missing")), "null"
        finally:
            shutil.rmtree(partial.parent, ignore_errors=True)
            self._used_at = time.monotonic()
            self._slots.put(slot)
        return f'{{"outcome": {json.dumps(outcome.to_json())}, "report": {report}}}'


def grade_on_worker(name: str, run: str, submission_id: str, job: dict[str, Any]) -> str:
    """The task Dask runs for one submission, on a worker with a free slot of plugin `name`.

    It first logs a STARTED event (Dask's own event log, on the scheduler): a worker that dies from here on
    died while grading this submission, which is what its count of tries is made of."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(STARTED, {"run": run, "submission": submission_id, "worker": worker.address})
    return worker.plugins[name].grade(job)


def kit_version() -> str:
    """Run on the scheduler before a batch sends anything: it unpickles every task, so it must load the kit too."""
    return VERSION
