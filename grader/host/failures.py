"""`failures` names what goes wrong in a call into the submission, in words written for the student.

Student code raised, crashed, hung, returned something that cannot travel, or the run's time
`Budget` (`grader check --timeout`) ran out: each becomes a `SubmissionFailure`, an AssertionError
that pytest reports as the test's failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from grader.host.limits import Limits


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


def submission_failure(error: object, what: str, limits: Limits) -> SubmissionFailure:
    """The failure that the error in a worker's reply (a dict of type, message and where, as it came) stands for."""
    failure = _describe_failure(error, what, limits)
    where = error.get("where") if isinstance(error, dict) else None
    if isinstance(where, dict) and isinstance(where.get("file"), str):
        failure.file = where["file"]
    return failure


def _describe_failure(error: object, what: str, limits: Limits) -> SubmissionFailure:
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
