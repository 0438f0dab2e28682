"""`render` draws results in the terminal: a submission's score table and failures (a class's summary is
`grader.cli.class_summary`'s)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader import markers
from grader.grade.reports import SUITES, GradeReport
from grader.grade.results import ExerciseStatus
from grader.grade.scoring import TestResult
from grader.intake.submission import Submission
from grader.lang import listed, tr, typeset
from grader.text import clean
from grader.view.breaking import Paragraph
from grader.view.next_step import NextStep, next_step, say_next


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
