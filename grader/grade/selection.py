"""`selection` decides which graded test files a run covers, from exercise names and a suite."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader import curriculum
from grader.curriculum import BY_ID, EXERCISES, TRACK_BY_ID, TRACK_OF, TRACKS, Track, default_track, prerequisites
from grader.kit import hidden_installed, kit_root
from grader.lang import tr

SUITES = ("public", "hidden", "all")


class UsageError(ValueError):
    """The user asked for something we cannot do; the message says what to do instead."""


@dataclass(frozen=True)
class Selection:
    """The exercises graded, their suite, and the test files to run: the exercises' own, and those of the
    `prerequisites` they build on that were not asked for, run only so that a failure coming from one of those
    says "blocked by" it (never reported as exercises of their own)."""

    exercises: tuple[str, ...]
    suite: str
    files: tuple[Path, ...]
    prerequisites: tuple[str, ...] = ()
    track: str = curriculum.FIRST.id  # the track the exercises belong to: one run grades one track


def select(exercises: list[str] | None, suite: str | None, *, root: Path | None = None,
           track: str | None = None) -> Selection:
    """Which test files to run; raises UsageError for unknown exercises or tracks, exercises of two tracks, or
    suites without tests. No exercise and no track: the kit's default track (`default_track`)."""
    root = root or kit_root()
    chosen_track = _track(exercises or (), track, root)
    suite = suite or ("all" if hidden_installed(root) else "public")
    if suite not in SUITES:
        raise UsageError(tr("unknown suite {suite}: use public, hidden or all", suite=repr(suite)))
    if suite == "hidden" and not hidden_installed(root):
        raise UsageError(tr("the hidden tests are not installed in this copy of the kit: use --suite public"))
    if suite == "all" and not hidden_installed(root):
        suite = "public"
    folders = ("public", "hidden") if suite == "all" else (suite,)
    wanted = [exercise.id for exercise in chosen_track.exercises if not exercises or exercise.id in exercises]
    chosen: list[str] = []
    for exercise_id in wanted:
        if _files(root, folders, exercise_id):
            chosen.append(exercise_id)
        elif exercises:
            raise UsageError(
                tr("no tests for {exercise} are installed in this copy of the kit yet", exercise=exercise_id)
                if suite == "all" else
                tr("no {suite} tests for {exercise} are installed in this copy of the kit yet", suite=suite,
                   exercise=exercise_id))
    if not chosen:
        raise UsageError(tr("no {suite} tests are installed in {folder}", suite=suite, folder=root / "tests"))
    needed = {need for exercise_id in chosen for need in prerequisites(exercise_id)} - set(chosen)
    quiet = [exercise.id for exercise in EXERCISES if exercise.id in needed and _files(root, folders, exercise.id)]
    files = [file for exercise in EXERCISES if exercise.id in (*chosen, *quiet)
             for file in _files(root, folders, exercise.id)]  # curriculum order: a prerequisite's tests run first
    return Selection(tuple(chosen), suite, tuple(files), tuple(quiet), chosen_track.id)


def _track(exercises: Sequence[str], track: str | None, root: Path) -> Track:
    """The one track `exercises` (and `track`, if given) name; the kit's default track when they name none."""
    if track is not None and track not in TRACK_BY_ID:
        raise UsageError(tr("unknown track {track}: choose from {known}", track=repr(track),
                            known=", ".join(t.id for t in TRACKS)))
    for name in exercises:
        if name not in BY_ID:
            known = ", ".join(exercise.id for exercise in (TRACK_BY_ID[track].exercises if track else EXERCISES))
            raise UsageError(tr("unknown exercise {name}: choose from {known}", name=repr(name), known=known))
    named = {TRACK_OF[name].id for name in exercises} | ({track} if track else set())
    if len(named) > 1:
        first, *others = (t for t in TRACKS if t.id in named)
        inside = ", ".join(name for name in exercises if TRACK_OF[name].id == others[0].id) or others[0].id
        raise UsageError(tr("the {track} track does not hold {exercises}: grade one track at a time "
                            "(--track {other})", exercises=inside, other=others[0].id, track=first.id))
    return TRACK_BY_ID[named.pop()] if named else default_track(root)


def _files(root: Path, folders: tuple[str, ...], exercise_id: str) -> list[Path]:
    found = [root / "tests" / folder / f"test_{exercise_id}.py" for folder in folders]
    return [path for path in found if path.is_file()]
