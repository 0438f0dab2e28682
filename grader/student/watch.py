"""`watch` reruns `grader check` on one exercise whenever a file of the submission is saved.

Saves are found by polling the files' modification times and sizes: no dependency, and it works
on every file system, editors that replace files included. Each check runs as its own
`python -m grader check` process, so grading stays exactly as sandboxed as a plain check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

import grader
from grader.curriculum import BY_ID
from grader.grade.scoring import ExerciseStatus
from grader.intake.submission import exercise_folder
from grader.student import state
from grader.student.next_step import next_exercise
from grader.text import clean

POLL_S = 0.5
SETTLE_S = 0.3  # an editor may write a file in several steps: wait until it holds still
STOP_TIMEOUT_S = 10.0

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


def run_check(arguments: list[str]) -> int:
    """`python -m grader ARGUMENTS` with our stdout; its stderr is shown after it, unless interrupted."""
    # The child must run this very grader, whichever folder the student started us from.
    package_root = str(Path(grader.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as errors:
        # Its own session: Ctrl-C reaches only us, and we stop the check so that it cleans up.
        process = subprocess.Popen([sys.executable, "-m", "grader", *arguments], stdin=subprocess.DEVNULL,
                                   stderr=errors, env=env, start_new_session=True)
        try:
            code = process.wait()
        except KeyboardInterrupt:
            _stop(process)
            raise
        errors.seek(0)
        sys.stderr.write(errors.read())
        sys.stderr.flush()
    return code


def _stop(process: subprocess.Popen[bytes]) -> None:
    # SIGTERM unwinds the check like Ctrl-C, so it kills its sandboxed worker on the way out.
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def watch(submission: Path, exercise: str | None, *, console: Console, quick: bool = True,
          poll_s: float = POLL_S, max_runs: int | None = None) -> int:
    """Check once, then again after every save, until Ctrl-C (exit 0)."""
    runs = 0
    saved: list[str] = []
    try:
        while True:
            target = exercise or next_exercise(submission, saved=saved)
            if console.is_terminal:
                console.clear()
            because = f" · saved {', '.join(saved)}" if saved else ""  # file names the student chose
            console.rule(f"[bold]grader check {target}[/]{escape(clean(because, newlines=False))}", align="left")
            before = snapshot(submission)
            arguments = ["check", target, "--submission", str(submission), *(["--quick"] if quick else [])]
            run_check(arguments)
            runs += 1
            if exercise is None:
                _say_what_next(submission, target, console)
            if max_runs is not None and runs >= max_runs:
                return 0
            where = escape(clean(str(submission), newlines=False))
            console.print(f"[dim]Watching {where} for saves · Ctrl-C to stop[/]")
            after = snapshot(submission)
            if after != before:
                saved = changed(before, after)  # saved while the check ran: check again at once
                continue
            _, saved = wait_for_save(submission, after, poll_s=poll_s)
    except KeyboardInterrupt:
        console.print("Stopped watching.")
        return 0


def _say_what_next(submission: Path, checked: str, console: Console) -> None:
    result = state.last_results(submission).get(checked)
    if result is None or not result.full_marks:
        if result is not None and result.status == ExerciseStatus.SLOW_TESTS_SKIPPED:
            console.print(f"[yellow]{checked} passes its quick tests[/]: `grader check {checked}` "
                          "runs the slow ones too.")
        return
    following = next_exercise(submission, saved=[])
    if following != checked:
        where = escape(clean(_file_of(submission, BY_ID[following].file), newlines=False))
        console.print(f"[green]✔ {checked} is done.[/] Next: {following}, in {where}; "
                      f"the next save checks it (`grader hint {following}` if you are stuck).")


def _file_of(submission: Path, filename: str) -> str:
    """Where the student edits `filename`: in the folder that holds the exercise files, or in the zip."""
    return f"{filename} in {submission}" if submission.is_file() else str(exercise_folder(submission) / filename)
