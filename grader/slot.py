"""`slot` grades submissions one after another for `grader batch`: torch imported once, one sandbox reused.

A batch runs one slot per job. For each submission the slot stages it into its zygote's sandbox
and forks a trusted child that runs the graded suites (pytest, fresh state every time) and writes
the report; the slot kills that child when the submission's time budget runs out. Hanging up on
the zygote, as the child does when it ends or dies, makes the zygote kill everything the
submission started before the next one is staged.

Protocol with the batch, one JSON object per line: jobs on stdin, results on stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1


def main() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # Our stdout carries results; nothing else may write there, not even by accident.
    results = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    device = sys.argv[1] if len(sys.argv) > 1 else "auto"

    import torch

    torch.set_num_threads(1)
    from .sandbox import Limits, WorkerStartError, Zygote, bwrap_problem

    _warm_up()

    limits = Limits.from_environment()
    isolate = bwrap_problem() is None
    zygote: Zygote | None = None
    try:
        for line in sys.stdin:
            job = json.loads(line)
            if zygote is None or not zygote.alive():
                if zygote is not None:
                    zygote.close()
                zygote = Zygote(device=device, limits=limits, isolate=isolate)
            try:
                result = grade(job, zygote, device)
            except WorkerStartError as error:  # the sandbox broke between two submissions: start anew
                zygote.close()
                zygote = None
                result = {"status": "failed", "reason": str(error)}
            results.write(json.dumps(result) + "\n")
            results.flush()
    finally:
        if zygote is not None:
            zygote.close()


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


def grade(job: dict[str, Any], zygote: Any, device: str) -> dict[str, Any]:
    """Grade one submission in a forked child within `job["timeout_s"]`; the report goes to job["report"]."""
    from .submission import SubmissionInputError, load

    started = time.monotonic()
    try:
        loaded = load(Path(job["path"]))
    except SubmissionInputError as error:
        return {"status": "refused", "reason": str(error)}
    client = zygote.connect(loaded)
    error_file = Path(job["report"]).with_suffix(".error")
    pid = os.fork()
    if pid == 0:
        _child(job, loaded, zygote, client, device, error_file)
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


def _child(job: dict[str, Any], loaded: Any, zygote: Any, client: Any, device: str, error_file: Path) -> None:
    """In the forked child: grade, write the report, and never return."""
    code = 1
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        from . import runner
        from .reports import write_json
        from .selection import select as select_tests
        from .session import GradingSession

        selection = select_tests(job["exercises"], job["suite"])
        session = GradingSession.around(Path(job["path"]), loaded, zygote, client, device=device)
        report = runner.grade(session, selection)
        write_json(report.to_json(), Path(job["report"]))
        code = 0
    except BaseException:
        with contextlib.suppress(OSError):
            error_file.write_text(traceback.format_exc())
    finally:
        os._exit(code)


if __name__ == "__main__":
    main()
