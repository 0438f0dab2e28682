"""`slot` grades submissions one after another for `grader batch`: torch imported once, one sandbox reused.

A batch runs one slot per job. The slot collects the graded suites once (pytest), then, for each
submission, stages it into its zygote's sandbox and forks a trusted child that runs the collected
tests (fresh state every time: nothing has run in the slot) and writes the report; the slot kills
that child when the submission's time budget runs out. Hanging up on
the zygote, as the child does when it ends or dies, makes the zygote kill everything the
submission started before the next one is staged.

Protocol with the batch, one JSON object per line: jobs on stdin, results on stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import processes


def main() -> None:
    processes.die_with_parent(signal.SIGTERM)
    # Jobs and results travel on copies of stdin and stdout: pytest captures fds 0-2 while it runs,
    # and nothing else may write results, not even by accident.
    jobs = os.fdopen(os.dup(0), "r")
    results = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    device = sys.argv[1] if len(sys.argv) > 1 else "auto"

    import torch

    torch.set_num_threads(1)
    from .sandbox import Limits, Zygote, bwrap_problem

    _warm_up()
    slot = _Slot(jobs, results, device, Zygote, Limits.from_environment(), bwrap_problem() is None)
    try:
        slot.serve()
    finally:
        slot.close()


class _Slot:
    """The slot's loop: jobs in, a forked child per job, one result line out per job."""

    def __init__(self, jobs: Any, results: Any, device: str, zygote_class: Any, limits: Any, isolate: bool) -> None:
        self._jobs = jobs
        self._results = results
        self._device = device
        self._make_zygote = lambda: zygote_class(device=device, limits=limits, isolate=isolate)
        self._zygote: Any = None
        self._pending: dict[str, Any] | None = None
        self._in_child = False

    def serve(self) -> None:
        """Collect once per selection of suites, and grade its jobs in children forked after collection."""
        from . import runner
        from .selection import select as select_tests

        while self._next_job() is not None:
            job = self._pending
            selection = select_tests(job["exercises"], job["suite"])
            self._selection_key = (job["exercises"], job["suite"])
            try:
                report = runner.collect_then_fork(selection, self._fork)
            except BaseException:
                if self._in_child:
                    self._child_failed()
                raise
            if report is not None:  # in a forked child, which grades one submission and ends here
                self._child_done(report)
            if self._pending is job:  # pytest never reached the tests: answer rather than retry forever
                self._pending = None
                self._answer({"status": "failed", "reason": "the graded suites could not be collected"})

    def close(self) -> None:
        if self._zygote is not None and not self._in_child:
            self._zygote.close()

    def _next_job(self) -> dict[str, Any] | None:
        if self._pending is None:
            line = self._jobs.readline()
            self._pending = json.loads(line) if line else None
        return self._pending

    def _fork(self) -> Any:
        """Called by the collected pytest session: grade jobs of this selection until none is left.

        Returns in a forked child only, with the session to grade; in this process, returns None
        when the jobs run out or the next one needs other suites.
        """
        from .sandbox import WorkerStartError

        while (job := self._next_job()) is not None and (job["exercises"], job["suite"]) == self._selection_key:
            self._pending = None
            try:
                if self._zygote is None or not self._zygote.alive():
                    if self._zygote is not None:
                        self._zygote.close()
                    self._zygote = self._make_zygote()
                result = self._grade(job)
            except WorkerStartError as error:  # the sandbox broke between two submissions: start anew
                if self._zygote is not None:
                    self._zygote.close()
                self._zygote = None
                result = {"status": "failed", "reason": str(error)}
            except Exception as error:  # one submission's trouble never stops the slot
                result = {"status": "failed", "reason": f"{type(error).__name__}: {error}"}
            if result.get("child"):
                return result["child"]
            self._answer(result)
        return None

    def _answer(self, result: dict[str, Any]) -> None:
        self._results.write(json.dumps(result) + "\n")
        self._results.flush()

    def _grade(self, job: dict[str, Any]) -> dict[str, Any]:
        """Fork a child for `job` and wait for it within `job["timeout_s"]`; the report goes to job["report"]."""
        from .submission import SubmissionInputError, load

        started = time.monotonic()
        try:
            loaded = load(Path(job["path"]))
        except SubmissionInputError as error:
            return {"status": "refused", "reason": str(error)}
        client = self._zygote.connect(loaded)
        error_file = Path(job["report"]).with_suffix(".error")
        pid = os.fork()
        if pid == 0:
            return {"child": self._child_session(job, loaded, client, error_file)}
        client.close()
        pidfd = os.pidfd_open(pid)
        try:
            finished = select.select([pidfd], [], [], float(job["timeout_s"]))[0]
        finally:
            os.close(pidfd)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        seconds = round(time.monotonic() - started, 3)
        if not finished:
            return {"status": "timeout", "reason": f"grading took longer than the {job['timeout_s']:g} s budget",
                    "seconds": seconds}
        if os.waitstatus_to_exitcode(status) == 0:
            return {"status": "graded", "seconds": seconds}
        reason = ""
        with contextlib.suppress(OSError):
            reason = error_file.read_text().strip().splitlines()[-1]
            error_file.unlink()
        return {"status": "failed", "reason": reason or "the grading process died", "seconds": seconds}

    def _child_session(self, job: dict[str, Any], loaded: Any, client: Any, error_file: Path) -> Any:
        """In the forked child: open the grading session the collected tests will use."""
        self._job, self._error_file, self._in_child = job, error_file, True
        try:
            processes.die_with_parent(signal.SIGKILL)
            from .session import GradingSession

            return GradingSession.around(Path(job["path"]), loaded, self._zygote, client, device=self._device)
        except BaseException:
            self._child_failed()

    def _child_done(self, report: Any) -> None:
        """In the forked child, after its tests: write the report and end, never returning."""
        try:
            from .reports import write_json

            write_json(report.to_json(), Path(self._job["report"]))
        except BaseException:
            self._child_failed()
        os._exit(0)

    def _child_failed(self) -> None:
        with contextlib.suppress(OSError):
            self._error_file.write_text(traceback.format_exc())
        os._exit(1)


def _warm_up() -> None:
    """Pay once, before the first fork, what every graded run would pay again: imports and torch's dispatch set-up."""
    import importlib
    import importlib.util

    import torch

    from . import diagnosis, instrument, plugin, runner, testing  # noqa: F401 - loaded for every child
    from .curriculum import EXERCISES

    instrument.count_ops(torch.add, [torch.zeros(2), 1], {})  # the first op count costs about a second
    if importlib.util.find_spec("solutions") is not None:
        for exercise in EXERCISES:
            with contextlib.suppress(ImportError):
                importlib.import_module(f"solutions.{exercise.id}")


if __name__ == "__main__":
    main()
