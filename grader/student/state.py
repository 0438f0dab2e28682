"""`state` remembers the hints a student has seen and the last results of each submission they checked.

Kept in the user's state folder (platformdirs: `~/.local/state/attention-kit` on Linux, or `GRADER_STATE_DIR`),
never in the folder the grader runs from: `grader list` shows a submission's progress from any folder, and a
check writes into no folder the user did not name. Results are keyed by the submission's resolved path. Both
files are written atomically and are only a convenience: an unreadable file counts as empty, and an unwritable
folder never fails a check.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from grader import settings
from grader.curriculum import BY_ID
from grader.grade.reports import GradeReport, write_json
from grader.grade.scoring import ExerciseStatus
from grader.lang import tr

STATE_ENV = "GRADER_STATE_DIR"
HINTS_FILE = "hints.json"
RESULTS_FILE = "last-report.json"
HINTS_SCHEMA = "grader-hints/1"
RESULTS_SCHEMA = "grader-last-report/1"
KEEP_SUBMISSIONS = 20


@dataclass(frozen=True)
class LastResult:
    """How one exercise did the last time it was checked."""

    exercise: str
    score: float
    max_score: float
    status: ExerciseStatus
    quick: bool
    checked_at: str


def _read(path: Path, schema: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("schema") == schema else {}


def state_folder() -> Path:
    """Where the state is kept: `GRADER_STATE_DIR`, else the user's state folder."""
    chosen = settings.state_dir()
    return Path(chosen) if chosen else Path(platformdirs.user_state_dir("attention-kit", appauthor=False))


def unsaved() -> str:
    """What a check says when its results could not be saved."""
    return tr("Could not save the results in {folder}/: `grader list` will not show them.", folder=state_folder())


def submission_key(submission: Path) -> str:
    return str(Path(submission).resolve())


def seen_hints(*, folder: Path | None = None) -> dict[str, int]:
    """The highest hint level shown so far, per exercise."""
    seen = _read((folder or state_folder()) / HINTS_FILE, HINTS_SCHEMA).get("seen", {})
    if not isinstance(seen, dict):
        return {}
    return {name: level for name, level in seen.items() if name in BY_ID and isinstance(level, int)}


def remember_hint(exercise: str, level: int, *, folder: Path | None = None) -> None:
    """Record that `level` of `exercise` was shown; raises OSError when the folder is not writable."""
    folder = folder or state_folder()
    seen = seen_hints(folder=folder)
    seen[exercise] = max(level, seen.get(exercise, 0))
    write_json({"schema": HINTS_SCHEMA, "seen": seen}, folder / HINTS_FILE)


def record_report(report: GradeReport, submission: Path, *, quick: bool, folder: Path | None = None) -> bool:
    """Keep each graded exercise's latest result for `grader list` and `grader watch`; False if unwritable."""
    path = (folder or state_folder()) / RESULTS_FILE
    data = _read(path, RESULTS_SCHEMA)
    submissions = data.get("submissions")
    if not isinstance(submissions, dict):
        submissions = {}
    key = submission_key(submission)
    entry = submissions.get(key)
    exercises = entry.get("exercises") if isinstance(entry, dict) else None
    if not isinstance(exercises, dict):
        exercises = {}
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    by_id = {exercise.id: exercise for exercise in report.exercises}
    for exercise in report.to_json()["exercises"]:
        exercises[exercise["id"]] = {
            **exercise, "status": by_id[exercise["id"]].status, "quick": quick, "suite": report.suite,
            "checked_at": now,
        }
    submissions.pop(key, None)
    submissions[key] = {"exercises": exercises}
    # A user checks a few submissions (a folder, a notebook, a copy): keep the most recent few, not all of them.
    submissions = dict(list(submissions.items())[-KEEP_SUBMISSIONS:])
    try:
        write_json({"schema": RESULTS_SCHEMA, "submissions": submissions}, path)
    except OSError:
        return False
    return True


def last_results(submission: Path, *, folder: Path | None = None) -> dict[str, LastResult]:
    """The latest result of each exercise checked for `submission`, by exercise id."""
    submissions = _read((folder or state_folder()) / RESULTS_FILE, RESULTS_SCHEMA).get("submissions", {})
    entry = submissions.get(submission_key(submission)) if isinstance(submissions, dict) else None
    exercises = entry.get("exercises") if isinstance(entry, dict) else None
    results: dict[str, LastResult] = {}
    for exercise_id, found in (exercises.items() if isinstance(exercises, dict) else ()):
        try:
            results[exercise_id] = LastResult(
                exercise=exercise_id, score=float(found["score"]), max_score=float(found["max_score"]),
                status=ExerciseStatus(str(found["status"])), quick=bool(found.get("quick")),
                checked_at=str(found.get("checked_at", "")),
            )
        except (KeyError, TypeError, ValueError):
            continue
    return {exercise_id: result for exercise_id, result in results.items() if exercise_id in BY_ID}
