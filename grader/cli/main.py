"""`cli` parses the `grader` command line and renders results; the work happens elsewhere.

Exit codes: 0 grading completed (whatever the score), 1 --fail-under not met, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress_bar import ProgressBar
from rich.table import Table

from grader.curriculum import BY_ID, EXERCISES
from grader.grade.reports import HIDDEN_VISIBILITY, VISIBILITIES, GradeReport, to_exercism, to_gradescope, write_json
from grader.grade.selection import Selection, UsageError, hidden_installed, kit_root, select
from grader.host import tiers
from grader.host.limits import Limits, WorkerStartError
from grader.host.session import GradingSession, resolve_device
from grader.host.tiers import IsolationRefused
from grader.intake.submission import Submission, SubmissionInputError
from grader.student import state
from grader.student.hints import start_here
from grader.text import clean, tolerant_output

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
    print(f"grader: error: {clean(message, newlines=False)}", file=sys.stderr)  # it may name a file of the submission
    raise SystemExit(EXIT_USAGE)


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not a percentage between 0 and 100")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
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
    check.add_argument("--gradescope-hidden", choices=VISIBILITIES, default=HIDDEN_VISIBILITY, metavar="WHEN",
                       help="when students see hidden tests in results.json: visible, after_due_date, "
                            f"after_published or hidden (default {HIDDEN_VISIBILITY}); while any test is "
                            "hidden from them, Gradescope hides their total score too")
    check.add_argument("--exercism", type=Path, default=None, metavar="PATH",
                       help="write an Exercism test-runner results.json (version 3) here")
    check.add_argument("--fail-under", type=_percent, default=None, metavar="PERCENT",
                       help="exit with 1 when the score is below this percentage")
    check.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                       help="time budget for the whole run; tests left when it is used up fail (default 300)")
    check.add_argument("--quick", action="store_true",
                       help="skip slow tests (the capstone); they count as 0, so the score is a lower bound")
    check.add_argument("-v", "--verbose", action="store_true", help="list every test, not only failures")
    check.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)

    batch = commands.add_parser("batch", help="grade every sub-folder or .zip of a folder, in parallel")
    batch.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR")
    batch.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="where DIR/<id>.json, DIR/grades.csv and DIR/summary.json go")
    batch.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1, metavar="N",
                       help="submissions graded at once (default: the number of cores)")
    batch.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                       help="time budget for one whole submission (default 600)")
    batch.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch.add_argument("--suite", choices=("public", "hidden", "all"), default=None)
    batch.add_argument("--force", action="store_true", help="regrade submissions whose report is up to date")
    batch.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)

    release = commands.add_parser("release", help="build the student distribution (or the autograder bundle)")
    release.add_argument("--out", type=Path, required=True, metavar="DIR")
    release.add_argument("--autograder", action="store_true",
                         help="include the hidden tests, the solutions and Gradescope's setup.sh and run_autograder")

    commands.add_parser("list", help="show the curriculum, your progress and the installed tests")

    hint = commands.add_parser("hint", help="show the next hint for an exercise, from the idea to the line to write")
    hint.add_argument("exercise", metavar="EXERCISE")
    hint.add_argument("--level", type=_positive_int, default=None, metavar="N",
                      help="show hint N (default: the next one you have not seen)")

    watch = commands.add_parser("watch", help="check an exercise again every time you save a file")
    watch.add_argument("exercise", nargs="?", default=None, metavar="EXERCISE",
                       help="exercise to check (default: the first one without full marks)")
    watch.add_argument("--submission", type=Path, default=None,
                       help="folder or .zip with the exercise files (default: exercises/)")
    watch.add_argument("--full", action="store_true", help="also run the slow tests (the capstone)")
    watch.add_argument("--max-runs", type=_positive_int, default=None, help=argparse.SUPPRESS)

    show = commands.add_parser("show", help="run your attention on the course notes' example and draw its weights")
    show.add_argument("what", choices=("attention",), metavar="attention")
    show.add_argument("--submission", type=Path, default=None,
                      help="folder or .zip with the exercise files (default: exercises/)")
    show.add_argument("--png", type=Path, default=None, metavar="PATH",
                      help='also write the heat-maps as a PNG image (needs pip install "attention-kit[plots]")')
    return parser


UNISOLATED_HELP = ("grade the hidden tests, or with the solutions installed, even where no isolation stronger than "
                   "`none` is available (refused otherwise)")


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False, highlight=False)
    if args.command == "list":
        return _list(console)
    if args.command == "hint":
        return _hint(args, console)
    if args.command == "watch":
        return _watch(args, console)
    if args.command == "show":
        return _show(args, console)
    if args.command == "batch":
        return _batch(args, console)
    if args.command == "release":
        return _release(args, console)
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
        session = GradingSession.open(submission, device=args.device, protect=tiers.exposure(selection.suite),
                                      allow_unisolated=args.allow_unisolated)
    except (UsageError, SubmissionInputError, ValueError, IsolationRefused) as error:
        _die(str(error))
    from grader.grade import runner

    report = _grade(runner, session, selection, console, quick=args.quick, timeout_s=args.timeout)
    if not state.record_report(report, submission, quick=args.quick):
        console.print(f"[dim]Could not save the results in {state.STATE_DIR}/: `grader list` will not show them.[/]")
    try:
        if args.json:
            write_json(report.to_json(), args.json)
        if args.gradescope:
            write_json(to_gradescope(report, hidden_visibility=args.gradescope_hidden), args.gradescope)
        if args.exercism:
            write_json(to_exercism(report), args.exercism)
    except OSError as error:
        _die(f"cannot write the report: {error}")
    render(report, console, verbose=args.verbose, files=session.submission)
    if args.fail_under is not None and report.percent < args.fail_under:
        console.print(f"[red]Score {report.percent:.1f}% is under --fail-under {args.fail_under:g}%.[/]")
        return EXIT_FAIL_UNDER
    return EXIT_OK


def _grade(
    runner: ModuleType, session: GradingSession, selection: Selection, console: Console, *, quick: bool,
    timeout_s: float,
) -> GradeReport:
    if not console.is_terminal:
        return runner.grade(session, selection, quick=quick, timeout_s=timeout_s)
    columns = (TextColumn("Grading {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(escape(clean(session.path.name or str(session.path), newlines=False)), total=None)
        return runner.grade(
            session, selection, quick=quick, timeout_s=timeout_s,
            on_start=lambda total: progress.update(task, total=total),
            on_test=lambda nodeid, outcome: progress.advance(task),
        )


def _batch(args: argparse.Namespace, console: Console) -> int:
    from grader.batch import schedule as batch
    if not args.submissions.is_dir():
        _die(f"{str(args.submissions)!r} is not a folder: give the folder that holds the submissions")
    if args.timeout <= 0:
        _die("--timeout must be a positive number of seconds")
    try:
        selection = select(None, args.suite)
        resolve_device(args.device)
        Limits.from_environment()  # the slots read the same variables: a bad one is a usage error here, once
        # Other students' submissions and the reports are secrets too, kept from each sandbox as the kit is.
        tiers.protect(args.submissions)
        tiers.protect(args.out)
        protect = tiers.exposure(selection.suite) or "other students' submissions are graded here"
        tiers.refuse_unless_isolated(why=protect, allowed=args.allow_unisolated)
        isolation = {"secrets": [str(args.submissions.resolve()), str(args.out.resolve())], "protect": protect,
                     "allow_unisolated": args.allow_unisolated}
    except (UsageError, ValueError, IsolationRefused) as error:
        _die(str(error))
    entries = batch.discover(args.submissions)
    if not entries:
        _die(f"no sub-folders or .zip files in {str(args.submissions)!r}")
    if args.out.exists() and not args.out.is_dir():
        _die(f"--out {str(args.out)!r} exists and is not a folder")
    counts = {"done": 0, "not graded": 0, "skipped": 0}
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[counts]}"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("Grading", total=len(entries), counts="")

        def on_result(result: batch.Result) -> None:
            kind = {"graded": "done", "skipped": "skipped"}.get(result.status, "not graded")
            counts[kind] += 1
            progress.update(task, advance=1, counts=" · ".join(f"{n} {k}" for k, n in counts.items() if n))

        results = batch.run(entries, args.out, selection, jobs=args.jobs, timeout_s=args.timeout,
                            device=args.device, force=args.force, on_result=on_result, isolation=isolation)
    _render_summary(batch.summarise(results, selection), console, args.out)
    return EXIT_OK


def _render_summary(summary: dict, console: Console, out: Path) -> None:
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(summary["statuses"].items()))
    tiers = ", ".join(f"{n} {tier}" for tier, n in sorted(summary["sandboxes"].items()))
    console.print(f"[bold]{summary['submissions']} submissions[/] ({statuses}; sandbox: {tiers}); "
                  f"mean {_points(summary['mean_score'])}/{_points(summary['max_score'])}")
    if summary["sandboxes"].get("none"):
        console.print(f"[yellow]{summary['sandboxes']['none']} submissions were graded without bubblewrap's "
                      "isolation (sandbox: none); their reports say why.[/]")
    histogram = Table(title="Scores", title_justify="left", box=None)
    histogram.add_column("percent")
    histogram.add_column("")
    histogram.add_column("count", justify="right")
    top = max((row["count"] for row in summary["histogram"]), default=0) or 1
    for row in summary["histogram"]:
        bar = "█" * round(30 * row["count"] / top)
        histogram.add_row(f"{row['from_percent']:>3}–{row['to_percent']:<3}", f"[cyan]{bar}[/]", str(row["count"]))
    console.print(histogram)
    means = Table(title="Mean per exercise", title_justify="left")
    means.add_column("Exercise")
    means.add_column("Mean", justify="right")
    for exercise_id, mean in summary["exercises"].items():
        means.add_row(exercise_id, f"{_points(mean)}/{_points(float(BY_ID[exercise_id].points))}")
    console.print(means)
    if summary["hardest_tests"]:
        hardest = Table(title="Tests most students fail", title_justify="left")
        hardest.add_column("Test")
        hardest.add_column("Pass rate", justify="right")
        for test in summary["hardest_tests"]:
            hardest.add_row(escape(clean(test["name"], newlines=False)), f"{test['pass_rate']:.0%}")
        console.print(hardest)
    for hit in summary["limits"]:
        reason = f" ({escape(clean(hit['reason'], newlines=False))})" if hit.get("reason") else ""
        console.print(f"[yellow]not graded or hit a limit:[/] {escape(clean(hit['id'], newlines=False))}: "
                      f"{', '.join(hit['limits'])}{reason}")
    console.print(f"[dim]Reports in {escape(str(out))}/: <id>.json, grades.csv, summary.json[/]")


def _release(args: argparse.Namespace, console: Console) -> int:
    import shlex

    from grader.release import ReleaseError, build

    try:
        written = build(args.out, autograder=args.autograder)
    except ReleaseError as error:
        _die(str(error))
    kind = "autograder bundle" if args.autograder else "student distribution"
    console.print(f"Wrote the {kind} to {escape(str(args.out))} ({len(written)} files).")
    console.print("GitHub Actions: .github/workflows/grade.yml grades exercises/ on every push.")
    if args.autograder:
        console.print("Gradescope: setup.sh and run_autograder are at its top (see docs/gradescope.md). Upload: zip "
                      "the folder's contents, not the folder, and upload the zip:")
        console.print(escape(f"  (cd {shlex.quote(str(args.out))} && zip -r ../autograder.zip .)"), soft_wrap=True)
    return EXIT_OK


def render(report: GradeReport, console: Console, *, verbose: bool = False, files: Submission | None = None) -> None:
    warn = Console(stderr=True, highlight=False, no_color=console.no_color)
    for warning in report.warnings:
        warn.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
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
    unwritten = [e.id for e in report.exercises if e.status == "not started" and not e.blocked_by and not verbose]
    for exercise in report.exercises:
        shown = [t for t in exercise.tests
                 if verbose or t.outcome in ("failed", "error") or (t.outcome == "skipped" and t.max_points)]
        if exercise.id in unwritten:
            continue
        for test in shown:
            mark = {"passed": "[green]✔[/]", "skipped": "[dim]-[/]"}.get(test.outcome, "[red]✘[/]")
            console.print(f"{mark} [bold]{escape(test.name.split('::')[-1])}[/] [dim]({exercise.id})[/]",
                          soft_wrap=True)
            if test.message:
                for line in test.message.splitlines():
                    console.print(f"    {escape(line)}", soft_wrap=True)
    if unwritten:
        console.print(f"[dim]○ {escape(clean(start_here(unwritten, files), newlines=False))}[/]", soft_wrap=True)
    console.print(f"[dim]Graded in {report.duration_s:.1f} s, torch {report.torch}, sandbox: {report.sandbox}.[/]")


def _points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _list(console: Console) -> int:
    root = kit_root()
    submission = _default_submission()
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
        status = "[dim]not checked yet[/]" if result is None else STATUS_STYLE.get(result.status, result.status)
        table.add_row(str(number), exercise.id, exercise.file,
                      f"{exercise.points:g}" if result is None else f"{_points(result.score)}/{exercise.points:g}",
                      ", ".join(suites) if suites else "[dim]not yet available[/]", status)
    console.print(table)
    earned = sum(result.score for result in results.values())
    total = sum(exercise.points for exercise in EXERCISES)
    progress = Table.grid(padding=(0, 1))
    progress.add_row("Progress", ProgressBar(total=total, completed=earned, width=40),
                     f"{_points(earned)}/{_points(total)} points ({100 * earned / total:.0f}%)")
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


def _hint(args: argparse.Namespace, console: Console) -> int:
    from grader.student.hints import HINTS

    hints = HINTS.get(args.exercise)
    if hints is None:
        _die(f"unknown exercise {args.exercise!r}: choose from {', '.join(e.id for e in EXERCISES)}")
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
        _die(f"{args.exercise} has {count} hints: use --level 1 to {count}")
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
        console.print(f"[dim]Could not remember this hint in {state.STATE_DIR}/: {escape(str(error))}[/]")
    return EXIT_OK


def _watch(args: argparse.Namespace, console: Console) -> int:
    from grader.student.watch import watch

    submission = args.submission or _default_submission()
    if not submission.exists():
        _die(f"submission {str(submission)!r} does not exist: give a folder or a .zip with --submission")
    if args.exercise is not None and args.exercise not in BY_ID:
        _die(f"unknown exercise {args.exercise!r}: choose from {', '.join(e.id for e in EXERCISES)}")
    return watch(submission, args.exercise, console=console, quick=not args.full, max_runs=args.max_runs)


def _show(args: argparse.Namespace, console: Console) -> int:
    submission = args.submission or _default_submission()
    if not submission.exists():
        _die(f"submission {str(submission)!r} does not exist: give a folder or a .zip with --submission")
    if args.png is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            _die('--png needs matplotlib: pip install "attention-kit[plots]"')
        if not (args.png.parent if str(args.png.parent) else Path(".")).is_dir():
            _die(f"--png {str(args.png)!r}: the folder {str(args.png.parent)!r} does not exist")
    from grader.student import show

    try:
        heatmaps = show.collect(submission)
    except (SubmissionInputError, ValueError, IsolationRefused) as error:
        _die(str(error))
    for heatmap in heatmaps:
        show.render(heatmap, console)
    if args.png is not None:
        try:
            written = show.write_png(heatmaps, args.png)
        except OSError as error:
            _die(f"cannot write {str(args.png)!r}: {error}")
        if written:
            console.print(f"Wrote the heat-maps to {escape(str(args.png))}.")
        else:
            console.print(f"[yellow]No heat-map to draw, so {escape(str(args.png))} was not written.[/]")
    return EXIT_OK if all(heatmap.weights is not None for heatmap in heatmaps) else EXIT_FAIL_UNDER


def run() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tolerant_output()
    # SIGTERM (a batch's time budget, a CI job cancelled) unwinds like Ctrl-C, so that the worker's
    # whole process tree is killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        code = main()
    except KeyboardInterrupt:
        print("grader: interrupted", file=sys.stderr)
        code = 130
    except WorkerStartError as error:  # the sandbox, never the submission: a failure of this machine or the kit
        print(f"grader: the grader itself failed: {clean(str(error), newlines=False)}", file=sys.stderr)
        code = 3
    except Exception as error:
        if os.environ.get("GRADER_DEBUG"):
            raise
        print(f"grader: internal error: {clean(f'{type(error).__name__}: {error}', newlines=False)} "
              "(set GRADER_DEBUG=1 for details)",
              file=sys.stderr)
        code = 3
    sys.exit(code)
