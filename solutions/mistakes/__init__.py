"""The catalogue of known mistakes: each is the reference `solutions/<exercise>.py` with a few exact edits.

`solutions/mistakes/<exercise>.py` holds `MISTAKES`, a tuple of `Mistake`. Each edit `(old, new)` replaces
text that occurs exactly once, applied in order to the reference; `grader.judge.variants` builds the
whole wrong file from them, its docstring `why`. Like the rest of `solutions/`, never shipped to students.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """One known-wrong version of an exercise: how it differs from the reference, and what to tell its author."""

    name: str
    why: str  # one sentence: what this version does wrong
    diagnosis: str  # the feedback line: what is wrong, then (after a colon) what to do
    edits: tuple[tuple[str, str], ...]  # (old, new): `old` occurs exactly once in the text being edited
