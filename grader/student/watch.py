"""`watch` reruns `grader check` whenever a file of the submission is saved.

Each check grades the exercise being worked on (the one named, else the first without full marks), the exercise
of every file saved, and the exercises built on those that were checked before: a save that breaks a finished
exercise shows at once, and `grader list` keeps the latest result of each.

Saves are found by polling the files' modification times and sizes: no dependency, and it works
on every file system, editors that replace files included. Every check runs in one process kept
warm for the session (`warm`), each in a fresh child with a fresh worker: as sandboxed, and graded
the same, as a plain `grader check`, without paying for torch's import and a new sandbox each time.
Where workers are spawned rather than forked (Windows, macOS, GRADER_WORKERS=spawn), each check is a
plain `grader check` of its own (`cold`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.curriculum import BY_ID, EXERCISES, prerequisites
from grader.grade.scoring import ExerciseStatus
from grader.host import portable
from grader.intake.submission import exercise_folder
from grader.lang import tr
from grader.student import state
from grader.student.cold import ColdChecker
from grader.student.next_step import next_exercise
from grader.student.warm import FirstFailure, WarmChecker
from grader.text import clean

POLL_S = 0.05  # a stat of a dozen files: cheap enough to look often
SETTLE_S = 0.1  # an editor may write a file in several steps: wait until it holds still

Snapshot = dict[str, tuple[int, int]]


def snapshot(submission: Path) -> Snapshot:
    """Modification time and size of every Python file and notebook a check of `submission` would read."""
    paths = [submission] if submission.is_file() else list(dict.fromkeys([
        *submission.glob("*.py"), *submission.glob("exercises/*.py"), *exercise_folder(submission).glob("*.py"),
        *submission.glob("*.ipynb"),  # a folder of notebooks is a submission too
    ]))
    files: Snapshot = {}
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue  # deleted between the listing and now: its absence is the change
        files[path.name if path == submission else str(path.relative_to(submission))] = (
            stat.st_mtime_ns, stat.st_size,
        )
    return files


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def wait_for_save(submission: Path, before: Snapshot, *, poll_s: float = POLL_S) -> tuple[Snapshot, list[str]]:
    while True:
        time.sleep(poll_s)
        now = snapshot(submission)
        if now == before:
            continue
        while True:
            time.sleep(SETTLE_S)
            later = snapshot(submission)
            if later == now:
                return now, changed(before, now)
            now = later


def watch(submission: Path, exercise: str | None, *, console: Console, quick: bool = True,
          poll_s: float = POLL_S, max_runs: int | None = None) -> int:
    """Check once, then again after every save, until Ctrl-C (exit 0); every check in one warm process."""
    runs = 0
    saved: list[str] = []
    checker: WarmChecker | ColdChecker = ColdChecker(quick=quick) if portable.wanted() else WarmChecker(quick=quick)
    try:
        while True:
            target = exercise or next_exercise(submission, saved=saved)
            targets = to_check(submission, target, saved)
            if console.is_terminal:
                console.clear()
            because = " · " + tr("saved {files}", files=", ".join(saved)) if saved else ""  # names the student chose
            console.rule(f"[bold]grader check {' '.join(targets)}[/]{escape(clean(because, newlines=False))}",
                         align="left")
            before = snapshot(submission)
            _check(checker, submission, targets, console, quick=quick)
            runs += 1
            if exercise is None:
                _say_what_next(submission, target, console)
            if max_runs is not None and runs >= max_runs:
                return 0
            where = escape(clean(str(submission), newlines=False))
            console.print("[dim]" + tr("Watching {submission} for saves · Ctrl-C to stop", submission=where) + "[/]")
            after = snapshot(submission)
            if after != before:
                saved = changed(before, after)  # saved while the check ran: check again at once
                continue
            _, saved = wait_for_save(submission, after, poll_s=poll_s)
    except KeyboardInterrupt:
        console.print(tr("Stopped watching."))
        return 0
    finally:
        checker.close()


def to_check(submission: Path, current: str, saved: list[str]) -> list[str]:
    """`current`, the exercise of each file saved (`attention.py`, `exercises/attention.py`, `01-attention.ipynb`),
    and the exercises built on those that were checked before (and are in the submission), in curriculum order."""
    touched = {found for found in (_exercise_of(name) for name in saved) if found is not None}
    checked = state.last_results(submission)
    built_on = {e.id for e in EXERCISES if e.id in checked and checked[e.id].status != ExerciseStatus.NOT_SUBMITTED
                and touched.intersection(prerequisites(e.id))}
    wanted = {current, *touched, *built_on}
    return [e.id for e in EXERCISES if e.id in wanted]


def _exercise_of(name: str) -> str | None:
    stem = re.sub(r"^\d+-", "", Path(name).stem)  # a generated notebook is NN-<exercise>.ipynb
    return stem if stem in BY_ID else None


def _check(checker: WarmChecker | ColdChecker, submission: Path, exercises: list[str], console: Console, *,
           quick: bool) -> None:
    """One check, shown as `grader check` shows it: the first failure as soon as it is known, then the table."""
    from grader.cli.render import marks_for, render, say
    from grader.intake.submission import SubmissionInputError, load

    def first(failure: FirstFailure) -> None:
        name = escape(clean(failure.test.split("::")[-1], newlines=False))
        say(console, f"[red]{marks_for(console).failed}[/] [bold]{name}[/] [dim]"
                     + tr("(first failure; the table follows)") + "[/]")
        for line in clean(failure.message).splitlines():
            say(console, escape(line), indent=4)

    checked = checker.check(submission, exercises, on_first_failure=first)
    if checked.report is None:
        kind = tr("grader: error:") if checked.refused else tr("grader: the grader itself failed:")
        console.print(f"[red]{kind}[/] {escape(clean(checked.problem))}", soft_wrap=True)
        return
    if not state.record_report(checked.report, submission, quick=quick):
        console.print(f"[dim]{escape(state.unsaved())}[/]")
    try:
        files = load(submission)
    except (SubmissionInputError, OSError):
        files = None
    render(checked.report, console, files=files)


def _say_what_next(submission: Path, checked: str, console: Console) -> None:
    from grader.cli.render import marks_for

    result = state.last_results(submission).get(checked)
    if result is None or not result.full_marks:
        if result is not None and result.status == ExerciseStatus.SLOW_TESTS_SKIPPED:
            passes = "[yellow]" + tr("{exercise} passes its quick tests", exercise=checked) + "[/]"
            console.print(tr("{passes}: `grader check {exercise}` runs the slow ones too.", passes=passes,
                             exercise=checked))
        return
    following = next_exercise(submission, saved=[])
    if following != checked:
        where = escape(clean(_file_of(submission, BY_ID[following].file), newlines=False))
        done = f"[green]{marks_for(console).passed} " + tr("{exercise} is done.", exercise=checked) + "[/]"
        console.print(tr("{done} Next: {exercise}, in {file}; the next save checks it (`grader hint {exercise}` if "
                         "you are stuck).", done=done, exercise=following, file=where))


def _file_of(submission: Path, filename: str) -> str:
    """Where the student edits `filename`: in the folder that holds the exercise files, or in the zip."""
    if submission.is_file():
        return tr("{file} in {archive}", file=filename, archive=str(submission))
    return str(exercise_folder(submission) / filename)
