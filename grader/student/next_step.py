"""`next_step` points a student at what to work on next: the first exercise not done, and its file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from grader.curriculum import BY_ID, EXERCISES
from grader.grade.scoring import ExerciseStatus
from grader.lang import tr
from grader.student import state

if TYPE_CHECKING:
    from grader.intake.submission import Submission


def next_exercise(submission: Path, *, saved: list[str]) -> str:
    """The first exercise, in curriculum order, whose last check was not full marks.

    When every exercise has full marks, the exercise of the file just saved, else the last one.
    """
    results = state.last_results(submission)
    for exercise in EXERCISES:
        result = results.get(exercise.id)
        if result is None or not (result.full_marks or result.status == ExerciseStatus.NOT_SUBMITTED):
            return exercise.id
    for name in saved:
        if Path(name).stem in BY_ID:
            return Path(name).stem
    return EXERCISES[-1].id


def start_here(unwritten: list[str], submission: Submission | None = None) -> str:
    """The one next step for exercises not written yet (in curriculum order): the file of the first to open."""
    first, file = unwritten[0], BY_ID[unwritten[0]].file
    shown = submission.shown(file) if submission else f"exercises/{file}"
    if len(unwritten) == 1:
        return tr("{exercise}: not implemented yet — open {file}", exercise=first, file=shown)
    return tr("{count} exercises not implemented yet: start with {exercise}: open {file}, then `grader check "
              "{exercise}`", count=len(unwritten), exercise=first, file=shown)
