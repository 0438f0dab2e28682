"""`cli` parses the `grader` command line and renders results; the work happens elsewhere.

Exit codes: 0 grading completed (whatever the score), 1 --fail-under not met, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .curriculum import EXERCISES
from .reports import GradeReport, to_gradescope, write_json
from .selection import Selection, UsageError, hidden_installed, kit_root, select
from .session import GradingSession
from .submission import SubmissionInputError

EXIT_OK, EXIT_FAIL_UNDER, EXIT_USAGE = 0, 1, 2
STATUS_STYLE = {
    "done": "[green]✔ done[/]",
    "failing": "[red]✘ failing[/]",
    "not started": "[dim]○ not started[/]",
    "slow tests skipped": "[yellow]◐ slow tests skipped[/]",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _die(f"{message} (see `{self.prog} --help`)")


def _die(message: str) -> NoReturn:
    print(f"grader: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not a percentage between 0 and 100")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="grader", description="Grade attention-kit exercises in a sandbox.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = commands.add_parser("check", help="grade one submission and print a score table")
    check.add_argument("exercises", nargs="*", metavar="EXERCISE", help="exercises to grade (default: all)")
    check.add_argument("--submission", type=Path, default=None,
                       help="folder or .zip with the exercise files (default: exercises/)")
    check.add_argument("--suite", choices=("public", "hidden", "all"), default=None,
                       help="which tests to run (default: all where hidden tests are installed, else public)")
    check.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    check.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the JSON report here")
    check.add_argument("--gradescope", type=Path, default=None, metavar="PATH",
                       help="write Gradescope's results.json here")
    check.add_argument("--fail-under", type=_percent, default=None, metavar="PERCENT",
                       help="exit with 1 when the score is below this percentage")
    check.add_argument("--quick", action="store_true",
                       help="skip slow tests (the capstone); they count as 0, so the score is a lower bound")
    check.add_argument("-v", "--verbose", action="store_true", help="list every test, not only failures")

    commands.add_parser("list", help="show the curriculum: exercises, points and installed tests")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False, highlight=False)
    if args.command == "list":
        return _list(console)
    return _check(args, console)


def _default_submission() -> Path:
    local = Path("exercises")
    return local if local.is_dir() else kit_root() / "exercises"


def _check(args: argparse.Namespace, console: Console) -> int:
    submission = args.submission or _default_submission()
    if not submission.exists():
        _die(f"submission {str(submission)!r} does not exist: give a folder or a .zip with --submission")
    try:
        selection = select(args.exercises, args.suite)
        # Opening the session starts the worker first; the imports below then overlap with its own.
        session = GradingSession.open(submission, device=args.device)
    except (UsageError, SubmissionInputError, ValueError) as error:
        _die(str(error))
    from . import runner

    report = _grade(runner, session, selection, console, quick=args.quick)
    try:
        if args.json:
            write_json(report.to_json(), args.json)
        if args.gradescope:
            write_json(to_gradescope(report), args.gradescope)
    except OSError as error:
        _die(f"cannot write the report: {error}")
    render(report, console, verbose=args.verbose)
    if args.fail_under is not None and report.percent < args.fail_under:
        console.print(f"[red]Score {report.percent:.1f}% is under --fail-under {args.fail_under:g}%.[/]")
        return EXIT_FAIL_UNDER
    return EXIT_OK


def _grade(
    runner: ModuleType, session: GradingSession, selection: Selection, console: Console, *, quick: bool
) -> GradeReport:
    if not console.is_terminal:
        return runner.grade(session, selection, quick=quick)
    columns = (TextColumn("Grading {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(escape(session.path.name or str(session.path)), total=None)
        return runner.grade(
            session, selection, quick=quick,
            on_start=lambda total: progress.update(task, total=total),
            on_test=lambda nodeid, outcome: progress.advance(task),
        )


def render(report: GradeReport, console: Console, *, verbose: bool = False) -> None:
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    table = Table(title=f"{escape(report.submission)} · {report.suite} tests · {report.device}", title_justify="left")
    table.add_column("Exercise")
    table.add_column("Tests", justify="right")
    table.add_column("Points", justify="right")
    table.add_column("Status")
    for exercise in report.exercises:
        status = STATUS_STYLE[exercise.status]
        if exercise.blocked_by:
            status = f"[red]✘ blocked by {', '.join(exercise.blocked_by)}[/]"
        table.add_row(exercise.id, f"{exercise.passed}/{exercise.counted}",
                      f"{_points(exercise.score)}/{_points(exercise.max_score)}", status)
    table.add_section()
    total = f"[bold]{_points(report.score)}/{_points(report.max_score)}[/]"
    table.add_row("[bold]Total[/]", "", total, f"{report.percent:.0f}%")
    console.print(table)
    for exercise in report.exercises:
        shown = [t for t in exercise.tests
                 if verbose or t.outcome in ("failed", "error") or (t.outcome == "skipped" and t.max_points)]
        if exercise.status == "not started" and not verbose:
            console.print(f"[dim]○ {exercise.id}: not implemented yet — open exercises/{exercise.id}.py[/]")
            continue
        for test in shown:
            mark = {"passed": "[green]✔[/]", "skipped": "[dim]-[/]"}.get(test.outcome, "[red]✘[/]")
            console.print(f"{mark} [bold]{escape(test.name.split('::')[-1])}[/] [dim]({exercise.id})[/]",
                          soft_wrap=True)
            if test.message:
                for line in test.message.splitlines():
                    console.print(f"    {escape(line)}", soft_wrap=True)
    console.print(f"[dim]Graded in {report.duration_s:.1f} s, torch {report.torch}, sandbox: {report.sandbox}.[/]")


def _points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _list(console: Console) -> int:
    root = kit_root()
    table = Table(title="Curriculum", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("Exercise")
    table.add_column("File")
    table.add_column("Points", justify="right")
    table.add_column("Tests")
    for number, exercise in enumerate(EXERCISES, start=1):
        suites = [s for s in ("public", "hidden") if (root / "tests" / s / f"test_{exercise.id}.py").is_file()]
        table.add_row(str(number), exercise.id, exercise.file, f"{exercise.points:g}",
                      ", ".join(suites) if suites else "[dim]not yet available[/]")
    console.print(table)
    if not hidden_installed(root):
        console.print("[dim]Hidden tests are not installed in this copy of the kit.[/]")
    return EXIT_OK


def run() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        code = main()
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        code = 130
    except Exception as error:
        if os.environ.get("GRADER_DEBUG"):
            raise
        print(f"grader: internal error: {type(error).__name__}: {error} (set GRADER_DEBUG=1 for details)",
              file=sys.stderr)
        code = 3
    sys.exit(code)
