"""`learning` runs the student's commands between checks: `list` progress, `hint`, `watch` and `show`."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table

from grader.cli.parse import EXIT_FAIL_UNDER, EXIT_OK, default_submission, die, existing_submission
from grader.curriculum import BY_ID, EXERCISES, TRACK_BY_ID, TRACK_OF, TRACKS, Track, default_track
from grader.grade.reports import SUITES, shown_percent
from grader.host import reach
from grader.host.tiers import IsolationRefused
from grader.intake.submission import SubmissionInputError
from grader.kit import hidden_installed, kit_root
from grader.lang import listed, tr
from grader.student import state
from grader.view.breaking import markdown
from grader.view.render import marks_for, points, say, status_style


def list_command(args: argparse.Namespace, console: Console) -> int:
    """`grader list`: the curriculum with each exercise's last result, and the points earned so far."""
    root = kit_root()
    track = TRACK_BY_ID[args.track] if args.track else default_track(root)
    submission = args.submission or default_submission()
    results = {key: result for key, result in state.last_results(submission).items() if TRACK_OF[key] == track}
    title = tr("Curriculum") if len(_tracks_here(root)) < 2 else tr("Curriculum: the {track} track ({title})",
                                                                    track=track.id, title=tr(track.title))
    table = Table(title=title, title_justify="left", box=None, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("#", justify="right", min_width=1)
    table.add_column(tr("Exercise"), no_wrap=True)
    table.add_column(tr("File"), no_wrap=True)
    table.add_column(tr("Points"), justify="right", no_wrap=True)
    table.add_column(tr("Tests"), min_width=7)
    table.add_column(tr("Status"), no_wrap=True)
    unchecked, unavailable = "[dim]" + tr("not checked yet") + "[/]", "[dim]" + tr("not yet available") + "[/]"
    for exercise in track.exercises:
        number = EXERCISES.index(exercise) + 1
        suites = [s for s in ("public", "hidden") if (root / "tests" / s / f"test_{exercise.id}.py").is_file()]
        result = results.get(exercise.id)
        status = unchecked if result is None else status_style(result.status, marks_for(console))
        table.add_row(str(number), exercise.id, exercise.file,
                      f"{exercise.points:g}" if result is None else f"{points(result.score)}/{exercise.points:g}",
                      listed([tr(SUITES[suite]) for suite in suites]) if suites else unavailable, status)
    console.print(table)
    earned = sum(result.score for result in results.values())
    total = track.points
    percent = shown_percent(earned, total)
    progress = Table.grid(padding=(0, 1))
    progress.add_row(tr("Progress"), ProgressBar(total=total, completed=earned, width=40),
                     tr("{earned}/{total} points ({percent}%)", earned=points(earned), total=points(total),
                        percent=percent))
    console.print(progress)
    if not results:
        shown = escape(str(submission))
        if track == default_track(root):
            say(console, "[dim]" + tr("Not checked yet: `grader check` grades {submission} and fills in the status "
                                       "column.", submission=shown) + "[/]")
        else:
            say(console, "[dim]" + tr("Not checked yet: `grader check --track {track}` grades {submission} and fills "
                                       "in the status column.", track=track.id, submission=shown) + "[/]")
    elif any(result.quick for result in results.values()):
        say(console, "[dim]" + tr("From your last checks; --quick ones skipped the slow tests, so their points are "
                                   "a lower bound.") + "[/]")
    if not hidden_installed(root):
        say(console, "[dim]" + tr("Hidden tests are not installed in this copy of the kit.") + "[/]")
    for other in _tracks_here(root):
        if other != track:
            say(console, "[dim]" + tr("The {track} track ({title}) is graded apart, with its own {points} points: "
                                       "`grader list --track {track}`.", track=other.id, title=tr(other.title),
                                       points=f"{other.points:g}") + "[/]")
    return EXIT_OK


def _tracks_here(root: Path) -> list[Track]:
    """The tracks this copy of the kit holds an exercise of (a release ships one)."""
    return [track for track in TRACKS
            if any((root / "exercises" / exercise.file).is_file() for exercise in track.exercises)]


def _unknown_exercise(exercise: str) -> str:
    choices = ", ".join(e.id for e in EXERCISES)
    return tr("unknown exercise {exercise}: choose from {choices}", exercise=repr(exercise), choices=choices)


def hint_command(args: argparse.Namespace, console: Console) -> int:
    """`grader hint`: the next hint for an exercise (or --level N), remembered so the next one is more concrete."""
    from grader.student.hints import HINTS

    hints = HINTS.get(args.exercise)
    if hints is None:
        die(_unknown_exercise(args.exercise))
    exercise, count = args.exercise, len(hints)
    seen = state.seen_hints().get(exercise, 0)
    level = args.level
    if level is None and seen >= count:
        console.print(tr("You have seen all {count} hints for {exercise}. See one again with "
                         "`grader hint {exercise} --level N` (1 to {count}); `grader check {exercise}` "
                         "says what is still wrong.", count=count, exercise=exercise))
        return EXIT_OK
    if level is None:
        level = seen + 1
    elif level > count:
        die(tr("{exercise} has {count} hints: use --level 1 to {count}", exercise=exercise, count=count))
    if level == count:
        footer = tr("This is the last hint for {exercise}.", exercise=exercise)
    else:
        footer = tr("Run `grader hint {exercise}` again for a more concrete hint ({count} more).", exercise=exercise,
                    count=count - level)
    # The hint in the reader's language (grader.po has each one); the separator one the console can write.
    title = f"[bold]{exercise}[/] {marks_for(console).separator} "
    console.print(Panel(markdown(tr(hints[level - 1]), code_theme="monokai"),
                        title=title + tr("hint {level} of {count}", level=level, count=count), title_align="left",
                        subtitle=footer, subtitle_align="left", padding=(1, 1)))
    try:
        state.remember_hint(exercise, level)
    except OSError as error:
        console.print("[dim]" + tr("Could not remember this hint in {folder}/: {error}", folder=state.state_folder(),
                                   error=escape(str(error))) + "[/]")
    return EXIT_OK


def watch_command(args: argparse.Namespace, console: Console) -> int:
    """`grader watch`: check an exercise again every time a file of the submission is saved."""
    from grader.student.watch import watch

    submission = existing_submission(args)
    if args.exercise is not None and args.exercise not in BY_ID:
        die(_unknown_exercise(args.exercise))
    unreachable = reach.problem()  # no tier can grade here: said once, not after every save
    if unreachable is not None:
        die(unreachable)
    track = TRACK_OF[args.exercise] if args.exercise else TRACK_BY_ID[args.track] if args.track else default_track()
    if args.exercise is not None and args.track is not None and track.id != args.track:
        die(tr("the {track} track does not hold {exercises}: grade one track at a time (--track {other})",
               track=args.track, exercises=args.exercise, other=track.id))
    return watch(submission, args.exercise, track=track, console=console, quick=not args.full,
                 max_runs=args.max_runs)


def show_command(args: argparse.Namespace, console: Console) -> int:
    """`grader show attention`: draw the submission's attention weights on the course notes' example."""
    submission = existing_submission(args)
    if args.png is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            die(tr('--png needs matplotlib: from the kit\'s folder, pip install -e ".[plots]"'))
        if not (args.png.parent if str(args.png.parent) else Path(".")).is_dir():
            die(tr("--png {path}: the folder {folder} does not exist", path=repr(str(args.png)),
                   folder=repr(str(args.png.parent))))
    from grader.student import show

    try:
        heatmaps = show.collect(submission)
    except (SubmissionInputError, ValueError, IsolationRefused) as error:
        die(str(error))
    for heatmap in heatmaps:
        show.render(heatmap, console)
    if args.png is not None:
        try:
            written = show.write_png(heatmaps, args.png)
        except OSError as error:
            die(tr("cannot write {path}: {error}", path=repr(str(args.png)), error=error))
        if written:
            console.print(tr("Wrote the heat-maps to {path}.", path=escape(str(args.png))))
        else:
            console.print("[yellow]" + tr("No heat-map to draw, so {path} was not written.",
                                          path=escape(str(args.png))) + "[/]")
    return EXIT_OK if all(heatmap.weights is not None for heatmap in heatmaps) else EXIT_FAIL_UNDER

