"""`failures` names what goes wrong in a call into the submission, in words written for the student.

Student code raised, crashed, hung, returned something that cannot travel, or the run's time
`Budget` (`grader check --timeout`) ran out: each becomes a `SubmissionFailure`, an AssertionError
that pytest reports as the test's failure. Its message is in the student's language; what the trusted
side knows of the cause travels apart from it, in `causes` (see `CAUSES`), which scoring and the batch's
summary read: never the message, whose words change with the language and may quote the submission.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from grader.host.limits import Limits
from grader.lang import tr

# The causes a failure can carry, each a word no language changes; "<file>" and "<exercise>" are filled in.
CAUSES = {
    "unwritten": "the code raised NotImplementedError: a stub not filled in yet",
    "missing:<file>": "the submission has no such exercise file",
    "import:<file>": "importing that exercise file failed (raised, crashed, hung or is missing): nothing was judged",
    "blocked:<exercise>": "the call stopped at that exercise's unwritten code (grader.judge.feedback adds it)",
    "timeout": "a call ran over its time limit",
    "crash": "the worker died during a call",
    "memory": "a call ran out of the memory the submission may use",
    "waits:<test>": "a structure test waiting for that behaviour test to confirm it (grader.grade.scoring adds it)",
}
# What an allocation that failed says: torch's allocator, Windows', and the kernel's ENOMEM (an mmap, an OSError).
OUT_OF_MEMORY = ("can't allocate memory", "not enough memory", "cannot allocate memory")
# A file the submission imports from the kit's exercises package, and does not hold.
_NO_MODULE = re.compile(r"^No module named 'exercises\.(\w+)'")


class SubmissionFailure(AssertionError):
    """Student code failed: it raised, crashed, hung, or returned something that cannot travel.

    `file` names the submission file the error was raised in, where known, so that a failure
    inside masking.py while testing multi_head_attention can say "blocked by masking".
    """

    file: str | None = None
    kind: str = ""  # the exception the submission raised ("ValueError"), as the worker named it; "" for the others
    causes: tuple[str, ...] = ()  # see CAUSES
    names_its_cause = False  # the error says what is wrong in the code itself (a NameError, an import that failed)

    def caused(self, *causes: str) -> SubmissionFailure:
        self.causes = (*self.causes, *causes)
        return self

    def again(self) -> SubmissionFailure:
        """A failure to raise once more where this one was met before (an import that failed): its words and what
        the trusted side knew of it."""
        failure = SubmissionFailure(str(self)).caused(*self.causes)
        failure.file, failure.kind, failure.names_its_cause = self.file, self.kind, self.names_its_cause
        return failure


class NotImplementedYet(SubmissionFailure):
    """Student code raised NotImplementedError: the stub has not been filled in."""

    causes = ("unwritten",)


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
        return tr("time budget of {seconds} s used up", seconds=f"{self.seconds:g}")


def submission_failure(error: object, what: str, limits: Limits, *, importing: bool = False,
                       memory_above: int | None = None) -> SubmissionFailure:
    """The failure that the error in a worker's reply (a dict of type, message and where, as it came) stands for;
    `importing`: the call was the import of an exercise file."""
    failure = _describe_failure(error, what, limits, importing, memory_above)
    # Whatever an exercise file's import raised or ran into, the test's hint about values would mislead.
    failure.names_its_cause = failure.names_its_cause or importing
    if isinstance(error, dict):
        failure.kind = str(error.get("type", ""))[:100]
    where = error.get("where") if isinstance(error, dict) else None
    if isinstance(where, dict) and isinstance(where.get("file"), str):
        failure.file = where["file"]
    return failure


def _describe_failure(error: object, what: str, limits: Limits, importing: bool,
                      memory_above: int | None = None) -> SubmissionFailure:
    if not isinstance(error, dict):
        return SubmissionFailure(tr("{what} failed", what=what))
    kind = str(error.get("type", "Exception"))
    message = str(error.get("message", ""))[:1000]
    where = error.get("where")
    location = ""
    if isinstance(where, dict) and where.get("file"):
        # Python's own location, ending a SyntaxError's words, is said once: ours, with the line's code, follows.
        message = message.removesuffix(f" ({where['file']}, line {where.get('line')})")
        code = str(where.get("code") or "")
        location = (tr(" ({file}, line {line}: `{code}`)", file=where["file"], line=where.get("line"),
                       code=code if len(code) <= 160 else code[:159] + "…") if code
                    else tr(" ({file}, line {line})", file=where["file"], line=where.get("line")))
    if kind == "NotImplementedError":
        return NotImplementedYet(tr("{what} is not implemented yet: {detail}", what=what, detail=message) if message
                                 else tr("{what} is not implemented yet", what=what))
    if kind == "ProtocolError":
        return SubmissionFailure(tr("{what} returned something that cannot leave the sandbox: {error}", what=what,
                                    error=message))
    if kind == "MemoryError" or any(words in message.lower() for words in OUT_OF_MEMORY):
        if memory_above is not None:  # the test's own budget (memory_budget), not the worker's limit
            return SubmissionFailure(tr("{what} ran out of memory: this test lets it use {mib} MiB beyond what torch "
                                        "itself holds{location}", what=what, mib=f"{memory_above / 2**20:g}",
                                        location=location)).caused("memory")
        return SubmissionFailure(tr("{what} ran out of memory: the submission may use {gib} GiB{location}", what=what,
                                    gib=f"{limits.memory_bytes / 2**30:g}", location=location)).caused("memory")
    missing = _NO_MODULE.match(message) if kind == "ModuleNotFoundError" else None
    if (importing and kind == "ModuleNotFoundError") or kind in ("SyntaxError", "IndentationError", "TabError"):
        error_text = message if kind == "ModuleNotFoundError" else f"{kind}: {message}"
        failure = SubmissionFailure(tr("{what} failed: {error}{location}", what=what, error=error_text,
                                       location=location))
        failure.names_its_cause = importing
    else:
        failure = SubmissionFailure(tr("{what} raised {kind}: {error}{location}", what=what, kind=kind, error=message,
                                       location=location))
        failure.names_its_cause = kind in ("NameError", "UnboundLocalError", "ImportError", "ModuleNotFoundError")
    return failure.caused(f"missing:{missing.group(1)}.py") if missing else failure
