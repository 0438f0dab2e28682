"""`class_summary` draws `grader batch`'s class summary in the terminal, once every submission is graded: counts, the
score histogram, the mean per exercise, the tests most students fail, the limits hit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.curriculum import BY_ID
from grader.lang import tr
from grader.text import clean
from grader.view.render import points

if TYPE_CHECKING:  # a type only: grader.batch's package loads the whole batch, which `grader check` never runs
    from grader.batch.summary import ClassSummary


def render_summary(summary: ClassSummary, console: Console, out: Path) -> None:
    """A batch's class summary: counts, score histogram, mean per exercise, hardest tests, limit hits.

    The statistics are over the scored submissions only, the others counted beside them; with none
    scored, it says so rather than show a class of zeros.
    """
    statuses = ", ".join(f"{n} {status}" for status, n in summary.statuses.items())
    tiers = ", ".join(f"{n} {tier}" for tier, n in sorted(summary.sandboxes.items()))
    console.print("[bold]" + escape(tr("{count} submissions: {statuses} (sandbox: {tiers})", count=summary.submissions,
                                       statuses=statuses, tiers=tiers)) + "[/]", soft_wrap=True)
    if summary.sandboxes.get("none"):
        console.print("[yellow]" + escape(tr(
            "{count} submissions were graded without isolation (sandbox: none): their code ran with this machine's "
            "access. Their reports say why.", count=summary.sandboxes["none"])) + "[/]")
    if summary.mean_score is None:
        console.print("[yellow]" + escape(tr("No submission was graded: no class mean, charts or tests most students "
                                             "fail.")) + "[/]")
    else:
        mean = tr("Mean {score}/{maximum}", score=points(summary.mean_score), maximum=points(summary.max_score))
        console.print(f"[bold]{escape(mean)}[/] {escape(_scored(summary))}", soft_wrap=True)
        _render_statistics(summary, console)
    for hit in summary.limits:
        reason = f" ({escape(clean(hit.reason, newlines=False))})" if hit.reason else ""
        said = tr("graded, but a limit stopped some tests") if hit.status == "graded" else tr(
            "not graded: {status}", status=hit.status)
        console.print(f"[yellow]{escape(said)}:[/] {escape(clean(hit.id, newlines=False))}: {', '.join(hit.limits)}"
                      f"{reason}")
    console.print("[dim]" + escape(tr("Reports in {folder}: <id>.json, grades.csv, summary.json; the class report: "
                                      "{report}", folder=f"{out}/", report=out / "report.html")) + "[/]",
                  soft_wrap=True)


def _scored(summary: ClassSummary) -> str:
    """Which submissions the class's statistics are over, and which they leave out."""
    apart = summary.submissions - summary.scored
    if apart:
        return tr("over the {count} graded ({apart} refused, limit or grader-error not counted)", count=summary.scored,
                  apart=apart)
    return tr("over the {count} graded", count=summary.scored)


def _render_statistics(summary: ClassSummary, console: Console) -> None:
    """The score histogram, the mean per exercise and the tests most students fail."""
    histogram = Table(title=tr("Scores"), title_justify="left", box=None)
    histogram.add_column(tr("percent"))
    histogram.add_column("")
    histogram.add_column(tr("Submissions"), justify="right")
    top = max((row.count for row in summary.histogram), default=0) or 1
    for row in summary.histogram:
        bar = "█" * round(30 * row.count / top)
        histogram.add_row(f"{row.from_percent:>3}–{row.to_percent:<3}", f"[cyan]{bar}[/]", str(row.count))
    console.print(histogram)
    means = Table(title=tr("Mean per exercise"), title_justify="left")
    means.add_column(tr("Exercise"))
    means.add_column(tr("Mean"), justify="right")
    for exercise_id, mean in summary.exercises.items():
        means.add_row(exercise_id, f"{points(mean or 0.0)}/{points(float(BY_ID[exercise_id].points))}")
    console.print(means)
    if summary.hardest_tests:
        hardest = Table(title=tr("Tests most students fail (where they judged the exercise's own code)"),
                        title_justify="left")
        hardest.add_column(tr("Test"), overflow="fold")  # in full, never cut mid-word
        hardest.add_column(tr("Failing"), justify="right")
        for test in summary.hardest_tests:
            exercise, _, name = test.name.partition(": ")
            suite = name.split("/", 1)[0] if "/" in name.split("::", 1)[0] else ""
            shown = f"{exercise}: {name.rpartition('::')[2]}" + (f" ({suite})" if suite else "")
            hardest.add_row(escape(clean(shown, newlines=False)), f"{1 - test.pass_rate:.0%} ({test.failed})")
        console.print(hardest)
    if summary.did_not_import:
        imports = Table(title=tr("Files that did not import (every test of the exercise stopped there)"),
                        title_justify="left")
        imports.add_column(tr("Exercise"), overflow="fold")
        imports.add_column(tr("Students"), justify="right")
        for failure in summary.did_not_import:
            imports.add_row(escape(f"{failure.exercise}: {failure.example}"), str(failure.count))
        console.print(imports)
    if summary.mistakes:
        mistakes = Table(title=tr("Known mistakes the class makes"), title_justify="left")
        mistakes.add_column(tr("Mistake"), overflow="fold")
        mistakes.add_column(tr("Students"), justify="right")
        for mistake in summary.mistakes[:10]:
            what = f"{mistake.exercise}: {mistake.name}" + (f" ({mistake.explanation})" if mistake.explanation else "")
            mistakes.add_row(escape(what), str(mistake.count))
        console.print(mistakes)
