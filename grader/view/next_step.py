"""`next_step` points a student at what to work on next: one step, the same in every view (`grader check`, `%grader`,
`grader watch`).

The step is the first unfinished exercise, in curriculum order, of those the view graded: not started or failing.
Only the tracks the view graded count: a check of the second track never sends a student to the first one's
exercises, which its release may not even hold (but to one that blocks it, whatever its track).
An exercise the view did not grade is unknown, never done (its file may have changed since it was last checked), so
the step says which ones it could not see rather than count them finished.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grader.curriculum import BY_ID, EXERCISES, FIRST, TRACK_OF
from grader.grade.results import ExerciseResult, ExerciseStatus
from grader.lang import listed, tr

if TYPE_CHECKING:
    from grader.intake.submission import Submission

# Passes every test that ran (`--quick` skipped the slow ones): nothing to do before the next exercise.
FINISHED = (ExerciseStatus.DONE, ExerciseStatus.SLOW_TESTS_SKIPPED)


@dataclass(frozen=True)
class NextStep:
    """Where a view's results leave the student."""

    exercise: str | None  # the first unfinished exercise graded, or the one it is blocked by; None: none
    status: ExerciseStatus | None  # NOT_STARTED or FAILING
    not_graded: tuple[str, ...]  # exercises before it (every one, when there is none) that the view did not grade
    not_submitted: tuple[str, ...]  # likewise, those the submission does not hold (a notebook's other exercises)
    not_started: int  # how many the view found not started
    slow_skipped: bool  # some finished exercise had its slow tests skipped

    @property
    def unseen(self) -> str | None:
        """The first exercise not known to be done, when every exercise graded is."""
        return next((e.id for e in EXERCISES if e.id in (*self.not_graded, *self.not_submitted)), None)


def next_step(results: Iterable[ExerciseResult]) -> NextStep:
    """The step `results` (each exercise's latest, graded in this view) leave: see the module's docstring."""
    graded = {result.id: result for result in results}
    tracks = {TRACK_OF[exercise_id] for exercise_id in graded if exercise_id in TRACK_OF} or {FIRST}
    order = [exercise.id for exercise in EXERCISES if TRACK_OF[exercise.id] in tracks]
    position = {exercise.id: number for number, exercise in enumerate(EXERCISES)}  # a blocker may be of another track
    not_graded: list[str] = []
    not_submitted: list[str] = []
    step: tuple[str, ExerciseStatus] | None = None
    for exercise_id in order:
        result = graded.get(exercise_id)
        if result is None:
            not_graded.append(exercise_id)
        elif result.status == ExerciseStatus.NOT_SUBMITTED:
            not_submitted.append(exercise_id)
        elif result.status not in FINISHED:
            # Blocked: a prerequisite (earlier in the curriculum) failed its own tests, run with this exercise's.
            blocker = min((b for b in result.blocked_by if b in position), key=position.__getitem__, default=None)
            step = (blocker, ExerciseStatus.FAILING) if blocker else (exercise_id, result.status)
            not_graded = [e for e in not_graded if position[e] < position[step[0]]]
            break
    return NextStep(step[0] if step else None, step[1] if step else None, tuple(not_graded),
                    tuple(not_submitted), sum(r.status == ExerciseStatus.NOT_STARTED for r in graded.values()),
                    any(r.status == ExerciseStatus.SLOW_TESTS_SKIPPED for r in graded.values()))


def say_next(step: NextStep, submission: Submission | None = None, *, watching: bool = False) -> str:
    """The step as one line: what to open or fix, or what the view could not see. `watching`: `grader watch`
    checks the next save itself."""
    if step.exercise is None:
        if step.unseen in step.not_graded:
            return tr("Every exercise checked here is done; the first not known to be done is {exercise}, not checked "
                      "in this run: `grader check {exercise}`.", exercise=step.unseen)
        if step.unseen is not None:
            return tr("Every exercise checked here is done; the next, {exercise}, is not in this submission.",
                      exercise=step.unseen)
        if step.slow_skipped:
            return tr("Every exercise passes its quick tests: `grader check` without --quick runs the slow ones too.")
        return tr("Every exercise is done.")
    file = BY_ID[step.exercise].file
    shown = submission.shown(file) if submission else f"exercises/{file}"
    if step.status == ExerciseStatus.FAILING:
        line = tr("Next: fix {exercise} in {file} (`grader hint {exercise}` if you are stuck).",
                  exercise=step.exercise, file=shown)
    elif step.not_started == 1:
        line = tr("{exercise}: not implemented yet — open {file}.", exercise=step.exercise, file=shown)
    elif watching:
        line = tr("{count} exercises not implemented yet: start with {exercise}: open {file}; the next save checks it.",
                  count=step.not_started, exercise=step.exercise, file=shown)
    else:
        line = tr("{count} exercises not implemented yet: start with {exercise}: open {file}, then `grader check "
                  "{exercise}`.", count=step.not_started, exercise=step.exercise, file=shown)
    if not step.not_graded:
        return line
    # Translators: {line} is a whole sentence already translated; {exercises} a list of exercise names.
    return tr("{line} Not checked in this run, so not known to be done: {exercises}.", line=line,
              exercises=listed(step.not_graded))
