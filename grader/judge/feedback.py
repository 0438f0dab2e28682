"""`feedback` is what a student reads for a failed test, and what the trusted side knows stopped it.

The message is in the student's language and may quote the submission (its exception, what it printed);
the causes (grader.host.failures.CAUSES) come from the failure's type and what the connection saw, and are
what scoring reads: never the message.
"""

from __future__ import annotations

import pytest

from grader import markers
from grader.curriculum import BY_ID
from grader.host.failures import NotImplementedYet, SubmissionFailure
from grader.lang import tr

MAX_MESSAGE_CHARS = 1500
PRINTED_LINES = 10


def causes_of(error: BaseException, exercise: str | None) -> list[str]:
    """What the trusted side knows stopped the test (grader.host.failures.CAUSES): from the failure's type and what
    the connection saw, never from its words."""
    failure = _original(error)
    if failure is None:
        return []
    causes = list(failure.causes)
    culprit = _culprit(error, exercise) if isinstance(error, SubmissionFailure) else None
    if culprit:
        causes.append(f"blocked:{culprit}")
    return causes


def _original(error: BaseException) -> SubmissionFailure | None:
    """The failure of a call into the submission that `error` is, or rewords: a test that catches one and raises
    its words again with more (`raise type(failure)(f"{failure} ...") from None`, "expected ValueError, got:
    {failure}") keeps what the connection saw, its causes, file and whether it names its own cause."""
    while isinstance(error.__context__, SubmissionFailure) and str(error.__context__) in str(error):
        error = error.__context__
    return error if isinstance(error, SubmissionFailure) else None


def _culprit(error: SubmissionFailure, exercise: str | None) -> str | None:
    """The other exercise whose unwritten code stopped this one's test. Only an unfinished file is surely to blame:
    any other error raised in another exercise's file may come from what this one passed it (scoring blames
    prerequisites that fail)."""
    source = error.file
    culprit = source.removesuffix(".py") if isinstance(source, str) else None
    if exercise and culprit in BY_ID and culprit != exercise and isinstance(error, NotImplementedYet):
        return culprit
    return None


def feedback(error: BaseException, *, printed: str = "", exercise: str | None = None, diagnosis: str = "") -> str:
    """The one short message a student sees for a failed test; a `diagnosis` replaces the test's own hint."""
    if isinstance(error, (SubmissionFailure, AssertionError)):
        message = str(error) or type(error).__name__
        culprit = _culprit(error, exercise) if isinstance(error, SubmissionFailure) else None
        if culprit:
            message = tr("blocked by {culprit}: {file} is not implemented yet, and {exercise} needs it.",
                         culprit=culprit, file=f"{culprit}.py", exercise=exercise) + " " + message
    elif isinstance(error, (pytest.skip.Exception, pytest.fail.Exception)):
        message = error.msg
    else:
        message = f"{type(error).__name__}: {error}"
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " [...]"
    if (original := _original(error)) is not None and original.names_its_cause:
        # The test's hint is about a symptom; this error names its own cause.
        message = markers.hint_pattern().sub("", message)
    if diagnosis:
        opening = "\n" if markers.is_diagnosis(diagnosis) else " "  # a diagnosis on a line of its own, a hint after
        message = markers.hint_pattern().sub("", message) + opening + diagnosis
    if printed:
        lines = printed.splitlines()[-PRINTED_LINES:]
        message += "\n" + tr("Your code printed (last lines):") + "\n" + "\n".join(line[:200] for line in lines)
    return message
