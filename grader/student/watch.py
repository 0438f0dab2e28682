"""`watch` reruns `grader check` whenever a file of the submission is saved.

The first check grades the exercise named, else every exercise: an exercise this session has not graded is
unknown, never done, whatever an earlier run said. Each later check grades the exercise being worked on (the one
named, else the next step: the first unfinished exercise, `next_step`), the exercise of every file saved, and the
exercises built on those that this session graded: a save that breaks a finished exercise shows at once, and
`grader list` keeps the latest result of each. A save while a check runs stops it (its child and worker killed as at
its time budget) and checks the newest files at once; each failure is printed once, with the table.

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
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from grader.curriculum import BY_ID, FIRST, Track, prerequisites
from grader.grade.results import ExerciseResult, ExerciseStatus
from grader.host import portable
from grader.intake.submission import exercise_folder
from grader.lang import tr
from grader.student import state
from grader.student.cold import ColdChecker
from grader.student.warm import FirstFailure, WarmChecker
from grader.text import clean
from grader.view.next_step import next_step

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


def _saved_since(submission: Path, before: Snapshot) -> bool:
    return snapshot(submission) != before


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


def wait_for_save(submission: Path, before: Snapshot, *, poll_s: float = POLL_S) -> tuple[Snapshot, list[str]]:
    while True:
        time.sleep(poll_s)
        if snapshot(submission) != before:
            return settled(submission, before)


def settled(submission: Path, before: Snapshot) -> tuple[Snapshot, list[str]]:
    """The files once they hold still, and those changed since `before`."""
    now = snapshot(submission)
    while True:
        time.sleep(SETTLE_S)
        later = snapshot(submission)
        if later == now:
            return now, changed(before, now)
        now = later


def watch(submission: Path, exercise: str | None, *, track: Track, console: Console, quick: bool = True,
          poll_s: float = POLL_S, max_runs: int | None = None) -> int:
    """Check once, then again after every save, until Ctrl-C (exit 0); every check in one warm process.

    Only `track`'s exercises are checked. Without `exercise`, the first check grades every one: what this session
    has not graded is unknown, and the next step (the first unfinished exercise) is the same in every line. A save
    during a check stops it and checks the newest files instead.
    """
    runs = 0
    saved: list[str] = []
    known: dict[str, ExerciseResult] = {}  # each exercise's latest result in this session
    checker: WarmChecker | ColdChecker = ColdChecker(quick=quick) if portable.wanted() else WarmChecker(quick=quick)
    try:
        while True:
            targets = to_check(exercise or next_step(known.values()).exercise, saved, known, track)
            if console.is_terminal:
                console.clear()
            because = " · " + tr("saved {files}", files=", ".join(saved)) if saved else ""  # names the student chose
            command = " ".join(["grader check", *(targets if len(targets) < len(track.exercises) else
                                                  ["--track", track.id] if track != FIRST else [])])
            console.rule(f"[bold]{command}[/]{escape(clean(because, newlines=False))}", align="left")
            before = snapshot(submission)
            if not _check(checker, submission, targets, console, quick=quick, known=known,
                          cancel_if=partial(_saved_since, submission, before)):
                _, saved = settled(submission, before)  # the check was stopped for this save
                continue
            runs += 1
            if max_runs is not None and runs >= max_runs:
                return 0
            where = escape(clean(str(submission), newlines=False))
            console.print("[dim]" + tr("Watching {submission} for saves · Ctrl-C to stop", submission=where) + "[/]")
            after = snapshot(submission)
            if after != before:
                saved = changed(before, after)  # saved as the check ended: check again at once
                continue
            _, saved = wait_for_save(submission, after, poll_s=poll_s)
    except KeyboardInterrupt:
        console.print(tr("Stopped watching."))
        return 0
    finally:
        checker.close()


def to_check(current: str | None, saved: list[str], known: Mapping[str, ExerciseResult],
             track: Track = FIRST) -> list[str]:
    """`current`, the exercise of each file saved (`attention.py`, `exercises/attention.py`, `01-attention.ipynb`),
    and the exercises built on those that this session graded (and are in the submission, and started or blocked), in
    curriculum order; every exercise when that is none (the session's first check). Only `track`'s exercises: a
    file of another track (one this track's exercises build on included) changes which of them are checked, never
    adds its own."""
    touched = {found for found in (_exercise_of(name) for name in saved) if found is not None}
    built_on = {e.id for e in track.exercises if e.id in known and _may_change(known[e.id])
                and touched.intersection(prerequisites(e.id))}
    wanted = {current, *touched, *built_on} - {None}
    return [e.id for e in track.exercises if e.id in wanted] or list(track.ids)


def _may_change(result: ExerciseResult) -> bool:
    """Whether a save of a file it builds on can change `result`: not for a stub, nor for a file not submitted."""
    if result.status == ExerciseStatus.NOT_SUBMITTED:
        return False
    return result.status != ExerciseStatus.NOT_STARTED or bool(result.blocked_by)


def _exercise_of(name: str) -> str | None:
    stem = re.sub(r"^\d+-", "", Path(name).stem)  # a generated notebook is NN-<exercise>.ipynb
    return stem if stem in BY_ID else None


def _check(checker: WarmChecker | ColdChecker, submission: Path, exercises: list[str], console: Console, *,
           quick: bool, known: dict[str, ExerciseResult], cancel_if: Callable[[], bool]) -> bool:
    """One check, shown as `grader check` shows it, its results added to `known`, with the next step they leave;
    False when `cancel_if()` stopped it. In a terminal, the first failure shows as soon as it is known, until the
    table and every failure replace it."""
    from grader.intake.submission import SubmissionInputError, load
    from grader.view.render import render

    with Live(console=console, transient=True, auto_refresh=False, redirect_stdout=False,
              redirect_stderr=False) as live:
        checked = checker.check(submission, exercises, cancel_if=cancel_if,
                                on_first_failure=partial(_show_first, live) if console.is_terminal else None)
    if checked.cancelled:
        return False
    if checked.report is None:
        kind = tr("grader: error:") if checked.refused else tr("grader: the grader itself failed:")
        console.print(f"[red]{kind}[/] {escape(clean(checked.problem))}", soft_wrap=True)
        return True
    if not state.record_report(checked.report, submission, quick=quick):
        console.print(f"[dim]{escape(state.unsaved())}[/]")
    known.update((result.id, result) for result in checked.report.exercises)
    try:
        files = load(submission)
    except (SubmissionInputError, OSError):
        files = None
    render(checked.report, console, files=files, step=next_step(known.values()), watching=True)
    return True


def _show_first(live: Live, failure: FirstFailure) -> None:
    from grader.view.render import marks_for

    name = escape(clean(failure.test.split("::")[-1], newlines=False))
    head = Text.from_markup(f"[red]{marks_for(live.console).failed}[/] [bold]{name}[/] [dim]"
                            + tr("(first failure; the table follows)") + "[/]")
    message = Padding(Text(clean(failure.message)), (0, 0, 0, 4))
    live.update(Group(head, message), refresh=True)
