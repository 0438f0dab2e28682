"""`dask_worker` is what a cluster batch (`cluster`) runs on each Dask worker: the check that the worker may grade
the batch (`describe`), the plugin that keeps its warm slots (`SlotPlugin`), and the task that grades one
submission in one of them (`grade_on_worker`). Every worker imports it from its own kit."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import shutil
import tempfile
from pathlib import Path
from typing import Any

from grader import __version__
from grader.batch.jobs import Isolation, Job, Outcome, Status
from grader.grade.selection import Selection, kit_root, select
from grader.lang import tr

try:
    from distributed import WorkerPlugin
except ImportError:  # `cluster.require_distributed` says what to install before anything here is used
    WorkerPlugin = object  # type: ignore[misc,assignment]

SLOT_MARGIN_S = 60  # past a submission's budget, how long a worker waits for its slot before replacing it
STARTED = "attention-kit-started"  # the Dask event a grading task logs as it starts (see `cluster._Dispatch`)


def fingerprint(selection: Selection) -> str:
    """What a worker's kit must match: the version, the grader, the solutions, and the suites this batch runs."""
    digest = hashlib.sha256(f"{__version__}|{selection.suite}|{','.join(selection.exercises)}".encode())
    kit = [path for folder in ("grader", "solutions") for path in sorted((kit_root() / folder).rglob("*.py"))]
    for path in sorted(selection.files) + kit:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def describe(exercises: list[str], suite: str, expected: str, protect: str, allow_unisolated: bool) -> dict[str, str]:
    """Run on each worker (`Client.run`): its kit version, and why it cannot grade this batch ("" when it can)."""
    from grader.host import tiers

    problem = ""
    try:
        if fingerprint(select(exercises, suite)) != expected:
            problem = tr("its kit differs from this one (version {version}, or its grader, solutions or suites): "
                         "install the same kit on it", version=__version__)
        else:
            tier = tiers.refuse_unless_isolated(why=protect, allowed=allow_unisolated).tier
    except Exception as error:  # a usage refusal (no isolation, Python unreachable) or a broken install
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
    return {"version": __version__, "problem": problem, "tier": "" if problem else tier}


class SlotPlugin(WorkerPlugin):
    """A Dask worker plugin: warm slots on each worker that runs this batch's kit (see the module's docstring)."""

    def __init__(self, name: str, expected: str, exercises: list[str], suite: str, device: str,
                 isolation: Isolation, environment: dict[str, str]) -> None:
        self.name = name
        self.resource = name  # what each grading task needs one of: only this plugin's slots offer it
        self.expected = expected
        self.exercises = exercises
        self.suite = suite
        self.device = device
        self.isolation = isolation
        self.environment = environment
        self.refused = ""
        self._folder: Path | None = None  # set up on the worker (so is all below): the plugin travels as data

    async def setup(self, worker: Any) -> None:
        from grader.batch.schedule import Slot
        from grader.host.scratch import remove_stale_stages

        self._slots: queue.Queue[Any] = queue.Queue()
        self._started: list[Any] = []

        state = describe(self.exercises, self.suite, self.expected, self.isolation.protect,
                         self.isolation.allow_unisolated)
        if state["problem"]:  # no slots, no resource: the scheduler never sends this worker a submission
            self.refused = state["problem"]
            logging.getLogger("grader.cluster").error("grader: worker %s refused: %s", worker.address, self.refused)
            return
        remove_stale_stages()
        self._folder = Path(tempfile.mkdtemp(prefix=f"grader-cluster-{os.getpid()}-"))
        self._folder.chmod(0o711)  # crossed, never listed, by bubblewrap running as uid 65534
        (self._folder / "stage").mkdir(mode=0o711)
        (self._folder / "reports").mkdir(mode=0o700)
        for _ in range(max(1, worker.state.nthreads)):
            slot = Slot(self.device, self._folder / "stage", self.environment)
            self._started.append(slot)
            self._slots.put(slot)
        await worker.set_resources(**{self.resource: len(self._started)})

    async def teardown(self, worker: Any) -> None:
        if not getattr(self, "_started", None):
            return
        with contextlib.suppress(Exception):
            await worker.set_resources(**{self.resource: 0})
        for slot in self._started:
            with contextlib.suppress(Exception):
                slot.close()
        self._started.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def grade(self, job: dict[str, Any]) -> str:
        """Grade one submission in a free slot; the outcome and the report, as JSON text."""
        if self._folder is None:  # never sent here: only the workers it accepted offer the resource the task needs
            raise RuntimeError(tr("this worker refused the batch: {problem}", problem=self.refused))
        slot = self._slots.get()
        partial = Path(tempfile.mkdtemp(dir=self._folder / "reports")) / "report.json"
        try:
            secrets = [*self.isolation.secrets, str(self._folder)]
            graded = Job(**{**job, "report": str(partial),
                            "isolation": Isolation(secrets, self.isolation.protect, self.isolation.allow_unisolated)})
            outcome = slot.grade(graded, timeout_s=graded.timeout_s + SLOT_MARGIN_S)
            report = partial.read_text(encoding="utf-8") if outcome.status == Status.GRADED else "null"
        except OSError:
            outcome, report = Outcome(Status.FAILED, tr("the report is missing")), "null"
        finally:
            shutil.rmtree(partial.parent, ignore_errors=True)
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
