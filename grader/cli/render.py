"""`render` draws results in the terminal: a submission's score table and failures, a class's summary."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader import markers
from grader.cli.breaking import Paragraph
from grader.curriculum import BY_ID
from grader.grade.reports import GradeReport
from grader.grade.results import ExerciseStatus
from grader.grade.scoring import TestResult
from grader.intake.submission import Submission
from grader.lang import N_, listed, tr, typeset
from grader.student.next_step import NextStep, next_step, say_next
from grader.text import clean

if TYPE_CHECKING:
    from grader.batch.summary import ClassSummary

@dataclass(frozen=True)
class Marks:
    """The marks a result line starts with, and the separator of a title."""

    passed: str
    failed: str
    todo: str
    partial: str
    separator: str


# The first set the output's encoding can write is used: a legacy Chinese console (GB2312, GBK: Windows' cp936)
# has no ✔ ✘ ◐ and would print each as "?", so that a passing and a failing test look the same.
MARK_SETS = (Marks("✔", "✘", "○", "◐", "·"), Marks("√", "×", "○", "◎", "|"), Marks("PASS", "FAIL", "-", "~", "|"))


# The suites' names as a reader sees them (in the score table's title and `grader list`).
SUITES = {"public": N_("public"), "hidden": N_("hidden"), "all": N_("all")}


def marks_for(console: Console) -> Marks:
    """The marks `console` can show."""
    for marks in MARK_SETS:
        try:
            "".join(astuple(marks)).encode(console.encoding)
        except (UnicodeEncodeError, LookupError):
            continue
        return marks
    return MARK_SETS[-1]


def status_style(status: str, marks: Marks, blocked_by: tuple[str, ...] = ()) -> str:
    """An exercise's status as the score tables show it: a mark, then words (a word mark, PASS, only on tests)."""

    def mark(symbol: str) -> str:
        return f"{symbol} " if len(symbol) == 1 else ""

    if blocked_by:
        blocked = tr("blocked by {names}", names=", ".join(blocked_by))
        return f"[red]{mark(marks.failed)}{blocked}[/]"
    styles = {
        "done": ("green", marks.passed, tr("done")),
        "failing": ("red", marks.failed, tr("failing")),
        "not started": ("dim", marks.todo, tr("not started")),
        "slow tests skipped": ("yellow", marks.partial, tr("slow tests skipped")),
        "not in this submission": ("dim", marks.todo, tr("not in this submission")),
    }
    if status not in styles:
        return status
    style, symbol, words = styles[status]
    return f"[{style}]{mark(symbol)}{words}[/]"


def _short(name: str) -> str:
    return name.split("::")[-1]


def _one_cause_once(tests: list[TestResult]) -> list[tuple[TestResult, list[TestResult]]]:
    """Each failing test with the later ones whose message is the same, word for word (one NameError at import
    fails every test alike): shown once, then named. Other tests stand alone."""
    groups: dict[object, tuple[TestResult, list[TestResult]]] = {}
    for test in tests:
        key = test.message if test.outcome in ("failed", "error") and test.message else id(test)
        if key in groups:
            groups[key][1].append(test)
        else:
            groups[key] = (test, [])
    return list(groups.values())


def _hint_once(message: str, shown: set[str]) -> str:
    """`message`, its closing "Hint: ..." said once per exercise in the terminal: a diagnosis that explains every
    failure of an exercise would otherwise close each of them the same way. Reports keep each message whole."""
    # A diagnosis, said on a line of its own at the exercise's first failure, closes the later ones as their hint.
    shown.update(markers.diagnoses(message))
    head, hint = markers.split_hint(message)
    if not hint:
        return message
    if hint in shown:
        return typeset(head + " " + tr("Hint: as above."))
    shown.add(hint)
    return message


def points(value: float) -> str:
    """A score as people write it: 7.5, 10, 3.33."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def say(console: Console, markup: str, *, indent: int = 0, keep: Sequence[str] = ()) -> None:
    """One line of feedback: in a terminal, wrapped where a reader expects (at spaces, between Chinese characters,
    never inside a word or a name in `keep`) with its indent kept on every line; elsewhere (a file, a pipe, CI's log)
    one line, whatever its length, so that it reads and greps whole."""
    if console.is_terminal:
        text = Text.from_markup(markup)
        # Quoted code and shapes or indices, "(B, T, d_model)", "(0, 0, 3)", kept whole as a name is.
        code = re.findall(r"`[^`\n]+`|\((?:[\w.]+, )+[\w.]*\)", text.plain)
        console.print(Padding(Paragraph(text, keep=[*keep, *code]), (0, 0, 0, indent)))
    else:
        console.print(" " * indent + markup, soft_wrap=True)


def render(report: GradeReport, console: Console, *, verbose: bool = False, files: Submission | None = None,
           warnings_to: Console | None = None, step: NextStep | None = None, watching: bool = False) -> None:
    """The score table, then each failing test with its message (every test when `verbose`), then the next step
    (`step`, else the report's own); the report's warnings first, on stderr unless `warnings_to` says where (a
    feedback file keeps them with the rest). `watching`: for `grader watch`, which checks the next save itself."""
    warn = warnings_to or Console(stderr=True, highlight=False, no_color=console.no_color, emoji=False)
    marks = marks_for(console)
    for warning in report.warnings:
        warn.print("[yellow]" + tr("warning:") + f"[/] {escape(warning)}", soft_wrap=True)
    # The title above the table, not in it: a table's title wraps to the table's width, which breaks a long path.
    dot = marks.separator
    suite = tr("{suite} tests", suite=tr(SUITES.get(report.suite, report.suite)))
    say(console, f"[italic]{escape(report.submission)} {dot} {suite} {dot} {report.device}[/]")
    table = Table()
    table.add_column(tr("Exercise"), no_wrap=True)  # an identifier: never cut
    table.add_column(tr("Tests"), justify="right")
    table.add_column(tr("Points"), justify="right")
    table.add_column(tr("Status"))
    table.add_column(tr("Graded from"), overflow="fold")  # a path in full, never cut with an ellipsis
    for exercise in report.exercises:
        status = status_style(exercise.status, marks, exercise.blocked_by)
        table.add_row(exercise.id, "" if exercise.absent else f"{exercise.passed}/{exercise.counted}",
                      f"{points(exercise.score)}/{points(exercise.max_score)}", status,
                      escape(", ".join(exercise.files)))
    table.add_section()
    total = f"[bold]{points(report.score)}/{points(report.max_score)}[/]"
    table.add_row("[bold]" + tr("Total") + "[/]", "", total, f"{report.percent_shown}%", "")
    console.print(table)
    # A stub's tests all say "not implemented yet": the next step's one line says it for them.
    unwritten = [e.id for e in report.exercises if e.status == "not started" and not e.blocked_by and not verbose]
    for exercise in report.exercises:
        shown = [t for t in exercise.tests
                 if verbose or t.outcome in ("failed", "error") or (t.outcome == "skipped" and t.max_points)]
        if exercise.id in unwritten:
            continue
        if exercise.absent:
            say(console, f"[dim]{marks.todo} {exercise.id}: {escape(exercise.absent)}[/]")
            continue
        hints_shown: set[str] = set()
        for test, same in _one_cause_once(shown):
            mark = {"passed": f"[green]{marks.passed}[/]", "skipped": "[dim]-[/]"}.get(test.outcome,
                                                                                     f"[red]{marks.failed}[/]")
            name = f"{mark} [bold]{escape(_short(test.name))}[/] [dim]({exercise.id})[/]"
            waits = [cause.removeprefix("waits:") for cause in test.causes if cause.startswith("waits:")]
            if waits and test.outcome == "failed":  # a structure test waiting for a behaviour test, which says why
                names = escape(listed(waits))
                once = (tr("counts once {names} pass", names=names) if len(waits) > 1
                        else tr("counts once {names} passes", names=names))
                # Pending, not failed on its own: fixing what it checks shows as ✘ turning into ◐.
                pending = f"[yellow]{marks.partial}[/] [bold]{escape(_short(test.name))}[/] [dim]({exercise.id})[/]"
                say(console, f"{pending} [dim]{once}[/]", keep=[_short(test.name), *waits])
                continue
            say(console, name, keep=[_short(test.name)])
            for line in typeset(_hint_once(test.message, hints_shown)).splitlines():
                say(console, escape(line), indent=4, keep=[_short(test.name)])
            if same:
                shown_names = ", ".join(_short(other.name) for other in same[:3]) + (", ..." if len(same) > 3 else "")
                more = (tr("and 1 more test fails the same way: {names}", names=escape(shown_names)) if len(same) == 1
                        else tr("and {count} more tests fail the same way: {names}", count=len(same),
                                names=escape(shown_names)))
                say(console, f"[dim]{more}[/]", indent=4, keep=[_short(other.name) for other in same[:3]])
    step = step or next_step(report.exercises)
    line = escape(clean(typeset(say_next(step, files, watching=watching)), newlines=False))
    if step.exercise is None and not step.unseen:
        say(console, f"[green]{marks.passed} {line}[/]")
    elif step.status == ExerciseStatus.NOT_STARTED:
        say(console, f"[dim]{marks.todo} {line}[/]")
    else:
        say(console, f"{marks.todo} {line}")
    console.print("[dim]" + tr("Graded in {seconds} s, torch {torch}, sandbox: {sandbox}.",
                               seconds=round(report.duration_s, 1), torch=report.torch, sandbox=report.sandbox) + "[/]")


def render_summary(summary: ClassSummary, console: Console, out: Path) -> None:
    """A batch's class summary: counts, score histogram, mean per exercise, hardest tests, limit hits.

    The statistics are over the scored submissions only, the others counted beside them; with none
    scored, it says so rather than show a class of zeros.
    """
    statuses = ", ".join(f"{n} {status}" for status, n in summary.statuses.items())
    tiers = ", ".join(f"{n} {tier}" for tier, n in sorted(summary.sandboxes.items()))
    console.print(f"[bold]{summary.submissions} submissions[/]: {statuses} (sandbox: {tiers})", soft_wrap=True)
    if summary.sandboxes.get("none"):
        console.print(f"[yellow]{summary.sandboxes['none']} submissions were graded without bubblewrap's "
                      "isolation (sandbox: none); their reports say why.[/]")
    if summary.mean_score is None:
        console.print("[yellow]No submission was graded: no class mean, histogram or tests most students fail.[/]")
    else:
        console.print(f"[bold]Mean {points(summary.mean_score)}/{points(summary.max_score)}[/] over "
                      f"{_scored(summary)}", soft_wrap=True)
        _render_statistics(summary, console)
    for hit in summary.limits:
        reason = f" ({escape(clean(hit.reason, newlines=False))})" if hit.reason else ""
        said = "graded, but a limit stopped some tests" if hit.status == "graded" else f"not graded ({hit.status})"
        console.print(f"[yellow]{said}:[/] {escape(clean(hit.id, newlines=False))}: {', '.join(hit.limits)}{reason}")
    console.print(f"[dim]Reports in {escape(str(out))}/: <id>.json, grades.csv, summary.json; the class report: "
                  f"{escape(str(out / 'report.html'))}[/]", soft_wrap=True)


def _scored(summary: ClassSummary) -> str:
    """Which submissions the class's statistics are over, and which they leave out."""
    apart = summary.submissions - summary.scored
    return f"the {summary.scored} graded" + (f" ({apart} refused, limit or grader-error not counted)" if apart else "")


def _render_statistics(summary: ClassSummary, console: Console) -> None:
    """The score histogram, the mean per exercise and the tests most students fail."""
    histogram = Table(title="Scores", title_justify="left", box=None)
    histogram.add_column("percent")
    histogram.add_column("")
    histogram.add_column("count", justify="right")
    top = max((row.count for row in summary.histogram), default=0) or 1
    for row in summary.histogram:
        bar = "█" * round(30 * row.count / top)
        histogram.add_row(f"{row.from_percent:>3}–{row.to_percent:<3}", f"[cyan]{bar}[/]", str(row.count))
    console.print(histogram)
    means = Table(title="Mean per exercise", title_justify="left")
    means.add_column("Exercise")
    means.add_column("Mean", justify="right")
    for exercise_id, mean in summary.exercises.items():
        means.add_row(exercise_id, f"{points(mean or 0.0)}/{points(float(BY_ID[exercise_id].points))}")
    console.print(means)
    if summary.hardest_tests:
        hardest = Table(title="Tests most students fail (where they judged the exercise's own code)",
                        title_justify="left")
        hardest.add_column("Test", overflow="fold")  # in full, never cut mid-word
        hardest.add_column("Failing", justify="right")
        for test in summary.hardest_tests:
            exercise, _, name = test.name.partition(": ")
            suite = name.split("/", 1)[0] if "/" in name.split("::", 1)[0] else ""
            shown = f"{exercise}: {name.rpartition('::')[2]}" + (f" ({suite})" if suite else "")
            hardest.add_row(escape(clean(shown, newlines=False)), f"{1 - test.pass_rate:.0%} ({test.failed})")
        console.print(hardest)
    if summary.did_not_import:
        imports = Table(title="Files that did not import (every test of the exercise stopped there)",
                        title_justify="left")
        imports.add_column("Exercise", overflow="fold")
        imports.add_column("Students", justify="right")
        for failure in summary.did_not_import:
            imports.add_row(escape(f"{failure.exercise}: {failure.example}"), str(failure.count))
        console.print(imports)
    if summary.mistakes:
        mistakes = Table(title="Known mistakes the class makes", title_justify="left")
        mistakes.add_column("Mistake", overflow="fold")
        mistakes.add_column("Students", justify="right")
        for mistake in summary.mistakes[:10]:
            what = f"{mistake.exercise}: {mistake.name}" + (f" ({mistake.explanation})" if mistake.explanation else "")
            mistakes.add_row(escape(what), str(mistake.count))
        console.print(mistakes)
