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
from grader.cli.render import marks_for, points, status_style
from grader.curriculum import BY_ID, EXERCISES
from grader.grade.selection import hidden_installed, kit_root
from grader.host import reach
from grader.host.tiers import IsolationRefused
from grader.intake.submission import SubmissionInputError
from grader.student import state


def list_command(args: argparse.Namespace, console: Console) -> int:
    """`grader list`: the curriculum with each exercise's last result, and the points earned so far."""
    root = kit_root()
    submission = args.submission or default_submission()
    results = state.last_results(submission)
    table = Table(title="Curriculum", title_justify="left", box=None, pad_edge=False,
                  padding=(0, 1, 0, 0))
    table.add_column("#", justify="right", min_width=1)
    table.add_column("Exercise", no_wrap=True)
    table.add_column("File", no_wrap=True)
    table.add_column("Points", justify="right", no_wrap=True)
    table.add_column("Tests", min_width=7)
    table.add_column("Status", no_wrap=True)
    for number, exercise in enumerate(EXERCISES, start=1):
        suites = [s for s in ("public", "hidden") if (root / "tests" / s / f"test_{exercise.id}.py").is_file()]
        result = results.get(exercise.id)
        status = "[dim]not checked yet[/]" if result is None else status_style(result.status, marks_for(console))
        table.add_row(str(number), exercise.id, exercise.file,
                      f"{exercise.points:g}" if result is None else f"{points(result.score)}/{exercise.points:g}",
                      ", ".join(suites) if suites else "[dim]not yet available[/]", status)
    console.print(table)
    earned = sum(result.score for result in results.values())
    total = sum(exercise.points for exercise in EXERCISES)
    progress = Table.grid(padding=(0, 1))
    progress.add_row("Progress", ProgressBar(total=total, completed=earned, width=40),
                     f"{points(earned)}/{points(total)} points ({100 * earned / total:.0f}%)")
    console.print(progress)
    if not results:
        console.print(f"[dim]Not checked yet: `grader check` grades {escape(str(submission))} and fills in "
                      "the status column.[/]")
    elif any(result.quick for result in results.values()):
        console.print("[dim]From your last checks; --quick ones skipped the slow tests, so their points are a "
                      "lower bound.[/]")
    if not hidden_installed(root):
        console.print("[dim]Hidden tests are not installed in this copy of the kit.[/]")
    return EXIT_OK


def hint_command(args: argparse.Namespace, console: Console) -> int:
    """`grader hint`: the next hint for an exercise (or --level N), remembered so the next one is more concrete."""
    from grader.student.hints import HINTS

    hints = HINTS.get(args.exercise)
    if hints is None:
        die(f"unknown exercise {args.exercise!r}: choose from {', '.join(e.id for e in EXERCISES)}")
    count = len(hints)
    seen = state.seen_hints().get(args.exercise, 0)
    level = args.level
    if level is None and seen >= count:
        console.print(f"You have seen all {count} hints for {args.exercise}. See one again with "
                      f"`grader hint {args.exercise} --level N` (1 to {count}); `grader check {args.exercise}` "
                      "says what is still wrong.")
        return EXIT_OK
    if level is None:
        level = seen + 1
    elif level > count:
        die(f"{args.exercise} has {count} hints: use --level 1 to {count}")
    if level == count:
        footer = f"This is the last hint for {args.exercise}."
    else:
        footer = f"Run `grader hint {args.exercise}` again for a more concrete hint ({count - level} more)."
    from rich.markdown import Markdown  # here: it costs 50 ms, and only `grader hint` renders Markdown

    console.print(Panel(Markdown(hints[level - 1], code_theme="monokai"),
                        title=f"[bold]{args.exercise}[/] · hint {level} of {count}", title_align="left",
                        subtitle=footer, subtitle_align="left", padding=(1, 1)))
    try:
        state.remember_hint(args.exercise, level)
    except OSError as error:
        console.print(f"[dim]Could not remember this hint in {state.state_folder()}/: {escape(str(error))}[/]")
    return EXIT_OK


def watch_command(args: argparse.Namespace, console: Console) -> int:
    """`grader watch`: check an exercise again every time a file of the submission is saved."""
    from grader.student.watch import watch

    submission = existing_submission(args)
    if args.exercise is not None and args.exercise not in BY_ID:
        die(f"unknown exercise {args.exercise!r}: choose from {', '.join(e.id for e in EXERCISES)}")
    unreachable = reach.problem()  # no tier can grade here: said once, not after every save
    if unreachable is not None:
        die(unreachable)
    return watch(submission, args.exercise, console=console, quick=not args.full, max_runs=args.max_runs)


def show_command(args: argparse.Namespace, console: Console) -> int:
    """`grader show attention`: draw the submission's attention weights on the course notes' example."""
    submission = existing_submission(args)
    if args.png is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            die('--png needs matplotlib: from the kit\'s folder, pip install -e ".[plots]"')
        if not (args.png.parent if str(args.png.parent) else Path(".")).is_dir():
            die(f"--png {str(args.png)!r}: the folder {str(args.png.parent)!r} does not exist")
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
            die(f"cannot write {str(args.png)!r}: {error}")
        if written:
            console.print(f"Wrote the heat-maps to {escape(str(args.png))}.")
        else:
            console.print(f"[yellow]No heat-map to draw, so {escape(str(args.png))} was not written.[/]")
    return EXIT_OK if all(heatmap.weights is not None for heatmap in heatmaps) else EXIT_FAIL_UNDER

