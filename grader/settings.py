"""`settings` is where the grader reads its environment: every `GRADER_*` variable, named once, with what it does.

No other module reads one (tests/kit/test_layout.py checks it), and docs/grading.md's table lists exactly these
(tests/kit/test_docs.py). Each is read where a command, a slot or a worker starts to need it, through the function
of its name here; what a run decides from them then travels as data: a batch's jobs carry the language, the limits
and the tier asked for to its slots and cluster workers (`grader.batch.jobs`), and a notebook's command is told its
language. A value is read when asked, not kept, so that one of the kit's tests may set a variable for itself alone.
"""

from __future__ import annotations

import os

VARIABLES: dict[str, str] = {  # name: what it does (docs/grading.md's table says it for users)
    "GRADER_LANG": "the language of what a command prints, where --lang is not given",
    "GRADER_SANDBOX": "the strongest isolation tier to try: auto, user or none",
    "GRADER_WORKERS": "how workers start: auto, fork (from a zygote) or spawn (each on its own)",
    "GRADER_LANDLOCK": "off switches Landlock off",
    "GRADER_BWRAP": "the bwrap program to use",
    "GRADER_STAGE_DIR": "where grader batch's slots stage their submissions (set by grader batch)",
    "GRADER_MEMORY_LIMIT_MB": "a worker's memory limit in MiB, scratch included",
    "GRADER_SCRATCH_MB": "the cap on a worker's scratch space in MiB",
    "GRADER_CALL_TIMEOUT_S": "the wall-clock limit of each call into the submission, in seconds",
    "GRADER_SALT": "the course's salt, of which every grading's seed is derived too",
    "GRADER_STATE_DIR": "the state folder of grader check, list and hint",
    "GRADER_DEBUG": "1 prints the traceback of an internal error",
}


def _read(name: str) -> str:
    assert name in VARIABLES, name
    return os.environ.get(name, "")


def language() -> str:
    return _read("GRADER_LANG")


def sandbox() -> str:
    return _read("GRADER_SANDBOX") or "auto"


def workers() -> str:
    return _read("GRADER_WORKERS") or "auto"


def landlock_off() -> bool:
    return _read("GRADER_LANDLOCK") == "off"


def bwrap() -> str:
    return _read("GRADER_BWRAP")


def stage_dir() -> str:
    return _read("GRADER_STAGE_DIR")


def limits() -> dict[str, str]:
    """The limits set here, by variable: `grader.host.limits.Limits.from_environment` checks and applies them."""
    names = ("GRADER_MEMORY_LIMIT_MB", "GRADER_CALL_TIMEOUT_S", "GRADER_SCRATCH_MB")
    return {name: value for name in names if (value := _read(name))}


def salt() -> str:
    return _read("GRADER_SALT")


def state_dir() -> str:
    return _read("GRADER_STATE_DIR")


def debug() -> bool:
    return bool(_read("GRADER_DEBUG"))
