"""`slot` grades submissions one after another for `grader batch`: torch imported once, one sandbox reused.

A batch runs one slot per job. The slot collects the graded suites once (pytest), then, for each
submission, stages it into its zygote's sandbox and forks a trusted child that runs the collected
tests (fresh state every time: nothing has run in the slot) and writes the report; the slot kills
that child when the submission's time budget runs out. Before the next submission is staged,
the zygote's sandbox is proven clean from here (`sandbox.Sandbox.recycle`: every process of the
previous submission killed, scratch emptied, the zygote healthy); a sandbox that cannot be is
replaced. A failure of the sandbox itself (one that will not come up, a worker that cannot start)
is retried once in a fresh sandbox, then reported as a grader failure, never as a score.

Protocol with the batch, one JSON object per line: jobs on stdin, results on stdout. While a child grades,
`{"cancel": true}` on stdin (`grader watch`: a newer save) kills it as the time budget would, and the job is
answered "cancelled"; a cancel that finds no child grading is dropped.
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
from typing import TYPE_CHECKING, NoReturn, TextIO

from grader import lang, settings
from grader.batch.jobs import Job, Outcome, Status
from grader.batch.waiting import Lines, exits_within
from grader.host import tiers, trees
from grader.host.backend import WorkerClient, WorkerSandbox, open_sandbox
from grader.host.limits import Limits, WorkerStartError
from grader.inside.shared import processes
from grader.intake.submission import Submission
from grader.lang import tr

if TYPE_CHECKING:
    from grader.grade.reports import GradeReport
    from grader.host.session import GradingSession

CANCEL_POLL_S = 0.05  # how often a grading child's wait looks for a cancel from the batch
EXIT_SANDBOX_FAILED = 75  # a child's exit status when the sandbox, not the submission, failed (EX_TEMPFAIL)


def main() -> None:
    processes.die_with_parent(signal.SIGTERM)
    # Until the first job says its language (each job carries the batch's, see _fork): what this machine's says.
    lang.use(lang.choose())
    # SIGTERM (the batch stopping) unwinds like Ctrl-C, so that `finally` removes the sandbox and its stage.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Jobs and results travel on copies of stdin and stdout: pytest captures fds 0-2 while it runs,
    # and nothing else may write results, not even by accident.
    jobs = Lines(os.dup(0))
    results = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    device = sys.argv[1] if len(sys.argv) > 1 else "auto"

    import torch

    torch.set_num_threads(1)
    _warm_up()
    slot = _Slot(jobs, results, device)
    try:
        slot.serve()
    except KeyboardInterrupt:
        pass
    finally:
        slot.close()
        with contextlib.suppress(OSError):
            os.rmdir(settings.stage_dir())  # the batch's staging folder, once the last slot is done with it


class _Slot:
    """The slot's loop: jobs in, a forked child per job, one result line out per job."""

    def __init__(self, jobs: Lines, results: TextIO, device: str) -> None:
        self._jobs = jobs
        self._results = results
        self._device = device
        self._zygote: WorkerSandbox | None = None
        self._opened_for: tuple[Limits, str] | None = None  # the limits and tier asked for that the sandbox has
        self._pending: Job | None = None
        self._in_child = False
        from grader.grade.runner import FailureFeed

        self._feed = FailureFeed()  # a plugin of every collected session; only a child sets where it writes

    def serve(self) -> None:
        """Collect once per selection of suites, and grade its jobs in children forked after collection."""
        from grader.grade import runner
        from grader.grade.selection import select as select_tests

        while self._next_job() is not None:
            job = self._pending
            selection = select_tests(job.exercises, job.suite)
            self._selection_key = (job.exercises, job.suite, job.quick)
            try:
                report = runner.collect_then_fork(selection, self._fork, quick=job.quick, feed=self._feed)
            except BaseException:
                if self._in_child:
                    self._child_failed()
                raise
            if report is not None:  # in a forked child, which grades one submission and ends here
                self._child_done(report)
            if self._pending is job:  # pytest never reached the tests: answer rather than retry forever
                self._pending = None
                self._answer(Outcome(Status.FAILED, tr("the graded suites could not be collected")))

    def close(self) -> None:
        if self._zygote is not None and not self._in_child:
            self._zygote.close()

    def _next_job(self) -> Job | None:
        while self._pending is None:
            line = self._jobs.readline()
            if not line:
                return None
            found = json.loads(line)
            if not found.get("cancel"):  # a cancel sent as the job it meant ended: nothing left to cancel
                self._pending = Job.from_json(found)
        return self._pending

    def _fork(self) -> GradingSession | None:
        """Called by the collected pytest session: grade jobs of this selection until none is left.

        Returns in a forked child only, with the session to grade; in this process, returns None
        when the jobs run out or the next one needs other suites.
        """
        while (job := self._next_job()) is not None and (job.exercises, job.suite, job.quick) == self._selection_key:
            self._pending = None
            lang.use(job.language)  # the job's, as the batch (or grader watch) was asked for it: data, not environment
            for attempt in (1, 2):  # a broken sandbox is replaced and the submission graded again, once
                try:
                    result = self._grade(job)
                except WorkerStartError as error:
                    self._discard_sandbox()
                    result = Outcome(Status.FAILED, tr("the sandbox failed ({count} times): {error}", count=attempt,
                                                       error=error))
                    continue
                except Exception as error:  # one submission's trouble never stops the slot
                    self._discard_sandbox()  # nor reaches the next submission through the sandbox
                    result = Outcome(Status.FAILED, f"{type(error).__name__}: {error}")
                break
            if not isinstance(result, Outcome):  # in the forked child
                return result
            self._answer(result)
            if result.status == Status.GRADED:
                self._learn_the_catalogue(Path(job.report))
        return None

    def _learn_the_catalogue(self, report: Path) -> None:
        """Observe here, once, the known mistakes of each exercise this submission failed: a child diagnoses a
        failure against the catalogue's facets (seconds to compute for the Transformer), and every child forked
        from now on inherits them instead of computing them again. Where no catalogue is installed, nothing."""
        from grader.judge import diagnosis

        try:
            failed = [entry["id"] for entry in json.loads(report.read_text(encoding="utf-8"))["exercises"]
                      if entry["score"] < entry["max_score"]]
        except (OSError, ValueError, KeyError, TypeError):
            return
        device = "cuda" if self._device == "cuda" else "cpu"
        for exercise in failed:
            if exercise in diagnosis.SCENARIOS:
                with contextlib.suppress(Exception):  # the child that needs them computes them itself
                    diagnosis.known_facets(exercise, device)

    def _sandbox(self, job: Job) -> WorkerSandbox:
        """The slot's sandbox, started anew when there is none, it died, or the job asks for other limits or another
        tier than it has (IsolationRefused: see `tiers`)."""
        wanted = (Limits.from_json(job.limits), job.isolation.sandbox)
        if self._zygote is not None and (not self._zygote.alive() or self._opened_for != wanted):
            self._discard_sandbox()
        if self._zygote is None:
            for secret in job.isolation.secrets:
                tiers.protect(Path(secret))
            self._zygote = open_sandbox(device=self._device, limits=wanted[0], protect=job.isolation.protect,
                                        allow_unisolated=job.isolation.allow_unisolated, sandbox=wanted[1])
            self._opened_for = wanted
        return self._zygote

    def _discard_sandbox(self) -> None:
        """Close the sandbox; a clean-up that fails (a tree it cannot remove) never keeps the job from its answer."""
        if self._zygote is not None:
            try:
                self._zygote.close()
            except Exception as error:
                print(f"grader slot: the sandbox could not be cleaned up: {type(error).__name__}: {error}",
                      file=sys.stderr, flush=True)
        self._zygote = None

    def _answer(self, result: Outcome) -> None:
        self._results.write(json.dumps(result.to_json()) + "\n")
        self._results.flush()

    def _grade(self, job: Job) -> Outcome | GradingSession:
        """Fork a child for `job` and wait for it within `job.timeout_s`; the report goes to `job.report`.

        Returns the Outcome here, and in the forked child the session it grades.
        """
        from grader.intake.submission import SubmissionInputError, load

        started = time.monotonic()
        try:
            loaded = Submission.from_json(job.intake) if job.intake is not None else load(Path(job.path))
        except SubmissionInputError as error:
            return Outcome(Status.REFUSED, str(error))
        zygote = self._sandbox(job)
        # Read here, not in the child: the zygote's control socket is this process's to read.
        # SandboxUnsafe (a WorkerStartError) makes tiers.choose() say why, and the retry use a weaker tier.
        zygote.check_self_test()
        client = zygote.connect(loaded)
        error_file = Path(job.report).with_suffix(".error")
        with trees.starting():  # the child leaves the block at once, so no lock is held in it
            pid = os.fork()
            if pid != 0:
                trees.adopt(pid)
        if pid == 0:
            return self._child_session(job, loaded, client, error_file)
        client.close()
        ended = self._wait_for(pid, job.timeout_s)
        if ended != "exited":  # the worker it talks to dies at the next recycle (`Sandbox.connect`)
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        seconds = round(time.monotonic() - started, 3)
        if ended == "cancelled":
            return Outcome(Status.CANCELLED, seconds=seconds)
        if ended == "timeout":
            return Outcome(Status.TIMEOUT, tr("grading took longer than the {budget} s budget",
                                              budget=f"{job.timeout_s:g}"), seconds)
        code = os.waitstatus_to_exitcode(status)
        if code == 0:
            return Outcome(Status.GRADED, seconds=seconds)
        reason = ""
        with contextlib.suppress(OSError, IndexError):
            reason = error_file.read_text(encoding="utf-8").strip().splitlines()[-1]
            error_file.unlink()
        if code == EXIT_SANDBOX_FAILED:
            raise WorkerStartError(reason or tr("the sandbox failed during grading"))
        return Outcome(Status.FAILED, reason or tr("the grading process died"), seconds)

    def _wait_for(self, pid: int, seconds: float) -> str:
        """How our grading child `pid` ended: "exited" within `seconds`, "timeout", or "cancelled" by the batch.

        A job line that comes meanwhile is kept as the next job; once the batch closed its end, only the time counts.
        """
        deadline = time.monotonic() + seconds
        while True:
            listening = self._pending is None and not self._jobs.closed
            if listening and (self._jobs.waiting() or select.select([self._jobs], [], [], 0)[0]):
                found = json.loads(self._jobs.readline() or "{}")
                if found.get("cancel"):
                    return "cancelled"
                if found:
                    self._pending = Job.from_json(found)
                continue
            left = deadline - time.monotonic()
            if exits_within(pid, max(0.0, min(left, CANCEL_POLL_S) if listening else left)):
                return "exited"
            if time.monotonic() >= deadline:
                return "timeout"

    def _child_session(self, job: Job, loaded: Submission, client: WorkerClient, error_file: Path) -> GradingSession:
        """In the forked child: open the grading session the collected tests will use."""
        self._job, self._error_file, self._in_child = job, error_file, True
        try:
            processes.die_with_parent(signal.SIGKILL)
            from grader.host.failures import Budget
            from grader.host.session import GradingSession

            session = GradingSession.around(Path(job.path), loaded, self._zygote, client, device=self._device,
                                            salt=job.salt)
            if job.budget_s is not None:  # as `grader check --timeout` bounds its run
                session.connection.budget = Budget(job.budget_s, started_at=session.opened_at)
            self._feed.path = Path(job.failures) if job.failures else None
            return session
        except BaseException:
            self._child_failed()

    def _child_done(self, report: GradeReport) -> None:
        """In the forked child, after its tests: write the report and end, never returning."""
        try:
            from grader.grade.reports import write_json

            # Into the folder the batch made for it, never made again: a batch killed meanwhile, whose rerun removed
            # it, gets nothing written in its out folder by a child that outlived it.
            write_json(report.to_json(), Path(self._job.report), make_folder=False)
        except BaseException:
            self._child_failed()
        os._exit(0)

    def _child_failed(self) -> NoReturn:
        with contextlib.suppress(OSError):
            self._error_file.write_text(traceback.format_exc(), encoding="utf-8")
        os._exit(EXIT_SANDBOX_FAILED if isinstance(sys.exc_info()[1], WorkerStartError) else 1)


def _warm_up() -> None:
    """Pay once, before the first fork, what every graded run would pay again: imports and torch's dispatch set-up."""
    import importlib
    import importlib.util

    import torch

    from grader import testing  # noqa: F401 - loaded for every child
    from grader.curriculum import EXERCISES
    from grader.grade import runner  # noqa: F401
    from grader.inside.shared import instrument
    from grader.judge import diagnosis, plugin  # noqa: F401

    instrument.count_ops(torch.add, [torch.zeros(2), 1], {})  # torch's dispatch machinery, once
    if importlib.util.find_spec("solutions") is not None:
        for exercise in EXERCISES:
            with contextlib.suppress(ImportError):
                importlib.import_module(f"solutions.{exercise.id}")


if __name__ == "__main__":
    main()

