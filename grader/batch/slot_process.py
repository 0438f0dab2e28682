"""`slot_process` is the batch's side of a `grader.batch.slot` process: it starts one, sends it a job at a time and
reads each Outcome back, and replaces a slot that breaks. `schedule` keeps one per job, a Dask worker of `cluster`
keeps its own, and `grader watch` (`student.warm`) grades with one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.batch.jobs import Job, Outcome, Status
from grader.host import trees
from grader.inside.shared import processes
from grader.kit import kit_root
from grader.lang import tr


class BatchStopped(Exception):
    """The batch is shutting down (Ctrl-C): the submission in progress gets no report."""


class Slot:
    """A `grader.batch.slot` process: grades one submission at a time with torch and its sandbox ready."""

    def __init__(self, device: str, stage_dir: Path, environment: Mapping[str, str] | None = None) -> None:
        """`environment` goes over this process's for the slot (a test picks an isolation tier this way)."""
        self._device = device
        self._stage_dir = stage_dir
        self._environment = dict(environment or {})
        self._closed = False
        self._start()

    def _start(self) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - the slot writes here until close()
        with trees.starting():  # a child of ours, never taken for a worker's escapee where we are a subreaper
            self.process = _STARTER.submit(
                subprocess.Popen, [sys.executable, "-m", "grader.batch.slot", self._device], cwd=kit_root(),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, encoding="utf-8",
                env={**os.environ, **self._environment, "OMP_NUM_THREADS": "1",
                     "GRADER_STAGE_DIR": str(self._stage_dir)},
                preexec_fn=_die_with_batch,
            ).result()
            trees.adopt(self.process.pid)

    def grade(self, job: Job, *, timeout_s: float, on_wait: Callable[[], bool] | None = None) -> Outcome:
        """Send one job and wait for its result, calling `on_wait` every 50 ms meanwhile: once it returns True, the
        job is cancelled (its child killed as at its time budget; "cancelled"). A slot that breaks is replaced."""
        assert self.process.stdin and self.process.stdout
        cancelled = False
        try:
            self.process.stdin.write(json.dumps(job.to_json()) + "\n")
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout_s
            while not (ready := select.select([self.process.stdout], [], [], 0.05 if on_wait else timeout_s)[0]):
                if on_wait is None or time.monotonic() > deadline:
                    break
                if on_wait() and not cancelled:
                    cancelled = True
                    self.process.stdin.write(json.dumps({"cancel": True}) + "\n")
                    self.process.stdin.flush()
            line = self.process.stdout.readline() if ready else ""
            return Outcome.from_json(json.loads(line))
        except (OSError, ValueError):
            if self._closed:
                raise BatchStopped from None  # no report: the submission was not graded
            problem = self._problem()
            self.process.kill()
            self.process.wait()
            self._log.close()
            self._start()
            return Outcome(Status.FAILED, tr("the grading process stopped: {problem}", problem=problem))

    def _problem(self) -> str:
        self._log.seek(0)
        lines = self._log.read()[-4000:].decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else tr("exit code {code}", code=self.process.poll())

    def close(self) -> None:
        """Stop the slot: SIGTERM lets it kill its sandbox and remove its stage; SIGKILL if it does not within 10 s."""
        self._closed = True
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # no more jobs: the slot's loop ends
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def _die_with_batch() -> None:
    # If the batch itself is killed, each slot hears SIGTERM and its children die with it.
    processes.die_with_parent(signal.SIGTERM)


# Slots are started from this one thread, which lives as long as the process: the signal a child asks for when
# its parent dies (PR_SET_PDEATHSIG) comes when the *thread* that started it ends, so a slot replaced from a
# short-lived thread (a pool's, once its work is done) would be stopped with that thread.
_STARTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slot-starter")
