"""`class_report` writes DIR/report.html, the page an instructor opens after `grader batch`, and DIR/feedback/.

One self-contained page: no script, nothing loaded from anywhere (its Content-Security-Policy forbids it),
readable offline and printable. It shows the score distribution and each exercise's mean as charts
(matplotlib's SVG, inline; where matplotlib is not installed the page says how to get them, and the tables
carry the same numbers), the known mistakes the class makes, most frequent first, with who made each and
the catalogue's explanation, the tests most students fail where they judged the exercise's own code, who
was not graded and why, and one row per student linking to `feedback/<id>.txt`: the text `grader check`
prints for that submission. Every text that comes from a submission (messages, names) is escaped: it is
shown, never interpreted as HTML. Nothing in it depends on when the batch ran, so a rerun writes the same page.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import io
import re
from pathlib import Path

from rich.console import Console

from grader import lang
from grader.batch import class_sections
from grader.batch.class_sections import FEEDBACK_FOLDER, anchor, links
from grader.batch.jobs import Result, Status
from grader.batch.summary import (
    CSV_STATUS,
    ClassSummary,
)
from grader.curriculum import BY_ID
from grader.grade.reports import GradeReport, atomic_path
from grader.grade.selection import Selection
from grader.kit import VERSION
from grader.lang import N_, tr
from grader.text import clean
from grader.view.render import points, render

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; } th, td { padding: 0.25em 0.6em; vertical-align: top; }
th { text-align: left; background: #f2f2f2; } tr { border-bottom: 1px solid #e4e4e4; }
td a { white-space: nowrap; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; font-size: 0.9em; }
.warn { background: #fff4d6; padding: 0.5em 0.8em; border-left: 4px solid #e0a800; }
pre { white-space: pre-wrap; margin: 0; font-size: 0.85em; max-width: 48em; }
table.students { font-size: 0.85em; } tr.scores { border-bottom: none; } tr.details td { padding-top: 0; }
tr.details { color: #444; } code { font-size: 0.95em; overflow-wrap: anywhere; }
table.hardest td:first-child { overflow-wrap: anywhere; } table.hardest pre { min-width: 26em; }
table.help td:nth-child(4), table.help td:nth-child(5) { max-width: 30em; } .finder { margin: 0.3em 0; }
ul.causes { margin: 0; padding-left: 1.1em; } ul.causes li { margin-bottom: 0.4em; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; } .charts svg { max-width: 100%; height: auto; }
@media print { body { margin: 0; max-width: none; } a { color: inherit; text-decoration: none; } }
"""
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def write(results: list[Result], selection: Selection, summary: ClassSummary, out: Path) -> None:
    """Write DIR/feedback/<id>.txt for every submission, then DIR/report.html; each file atomically."""
    folder = out / FEEDBACK_FOLDER
    folder.mkdir(exist_ok=True)
    reports = {result.id: _graded_report(result) for result in results}  # each report read once, for both
    for result in results:
        _write_text(folder / f"{result.id}.txt", feedback_text(result, reports[result.id]))
    ids = {f"{result.id}.txt" for result in results}
    for stale in folder.glob("*.txt"):  # a submission no longer in the folder leaves no feedback behind
        if stale.name not in ids:
            stale.unlink(missing_ok=True)
    _write_text(out / "report.html", page(results, selection, summary, reports))


def _graded_report(result: Result) -> GradeReport | None:
    """A graded submission's report, read back; None for one that was not graded (or whose report is unreadable)."""
    if result.ended != Status.GRADED:
        return None
    try:
        return GradeReport.from_json(dict(result.report))
    except (KeyError, TypeError, ValueError):
        return None


def feedback_text(result: Result, report: GradeReport | None) -> str:
    """What `grader check` prints for this submission (plain text, from its `report`), or why it was not graded."""
    if report is None:
        reasons = result.report.get("warnings") or [tr("no reason was recorded")]
        return clean(tr("{id}: {status}, not graded: {reason}", id=result.id, status=CSV_STATUS[result.ended],
                        reason=reasons[0]) + "\n")
    console = Console(file=io.StringIO(), width=100, color_system=None, force_terminal=False, soft_wrap=False,
                      emoji=False)
    # Titled by the id, not the path it was graded from: a file that may be handed to the student names no folder
    # of the instructor's.
    render(dataclasses.replace(report, submission=result.id), console, verbose=False, warnings_to=console)
    return clean(console.file.getvalue())  # type: ignore[attr-defined]


def page(results: list[Result], selection: Selection, summary: ClassSummary,
         reports: dict[str, GradeReport | None]) -> str:
    """The whole report.html; `reports`, each graded submission's report by id."""
    ordered = class_sections.standings(results, reports, summary.max_score)
    sections = [_overview(summary, selection), class_sections.needs_help(ordered), _charts(summary),
                class_sections.hardest(summary), _mistakes(summary), _imports(summary), _not_graded(summary),
                class_sections.students(results, selection, reports, ordered)]
    title = tr("Class report: {count} submissions", count=summary.submissions)
    language = "zh" if lang.current() == "zh" else "en"
    return (f'<!DOCTYPE html>\n<html lang="{language}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{_e(title)}</h1>\n"
            + "\n".join(section for section in sections if section) + "\n</body>\n</html>\n")


def _overview(summary: ClassSummary, selection: Selection) -> str:
    statuses = ", ".join(f"{n} {status}" for status, n in summary.statuses.items())
    tiers = ", ".join(f"{n} {tier}" for tier, n in sorted(summary.sandboxes.items()))
    overview = tr("{statuses} (sandbox: {tiers}).", statuses=statuses, tiers=tiers)
    suite = tr("Tests: {suite} suite; attention-kit {version}.", suite=selection.suite, version=VERSION)
    lines = [f"<p>{_e(overview)}</p>", f'<p class="note">{_e(suite)}</p>']
    if summary.mean_score is None:
        nobody = tr("No submission was graded: no class mean, charts or tests most students fail.")
        lines.append(f'<p class="warn">{_e(nobody)}</p>')
    else:
        mean = tr("Mean {score} / {maximum}", score=points(summary.mean_score), maximum=points(summary.max_score))
        over = tr("over the {count} graded submissions; refused, limit and grader-error ones are listed apart.",
                  count=summary.scored)
        lines.append(f"<p><strong>{_e(mean)}</strong> {_e(over)}</p>")
    if summary.sandboxes.get("none"):
        unisolated = tr("{count} submissions were graded without isolation (sandbox: none): their code ran with this "
                        "machine's access. Their reports say why.", count=summary.sandboxes["none"])
        lines.append(f'<p class="warn">{_e(unisolated)}</p>')
    return "\n".join(lines)


def _charts(summary: ClassSummary) -> str:
    if summary.mean_score is None:
        return ""
    try:
        charts = importlib.import_module("grader.batch.charts")  # ImportError without matplotlib
    except ImportError:
        return (f'<h2 id="charts">{_e(tr("Scores"))}</h2>\n<p class="note">' + _prose(tr(
            "Charts need matplotlib: `{command}` in the kit's folder. The tables give the same numbers.",
            command='pip install -e ".[plots]"')) + "</p>\n" + _histogram_table(summary) + _means_table(summary))
    return (f'<h2 id="charts">{_e(tr("Scores"))}</h2>\n<div class="charts">\n'
            f"{charts.histogram(summary)}\n{charts.means(summary)}\n</div>\n" + _means_table(summary))


def _histogram_table(summary: ClassSummary) -> str:
    rows = "".join(f"<tr><td>{row.from_percent}–{row.to_percent}%</td><td class=n>{row.count}</td></tr>"
                   for row in summary.histogram)
    return (f'<table class="histogram"><tr><th>{_e(tr("Score"))}</th><th>{_e(tr("Submissions"))}</th></tr>{rows}'
            "</table>")


def _means_table(summary: ClassSummary) -> str:
    rows = "".join(f"<tr><td>{_e(x)}</td><td class=n>{points(mean or 0.0)} / {points(float(BY_ID[x].points))}"
                   "</td></tr>" for x, mean in summary.exercises.items())
    return f'<table class="means"><tr><th>{_e(tr("Exercise"))}</th><th>{_e(tr("Mean"))}</th></tr>{rows}</table>'


def _mistakes(summary: ClassSummary) -> str:
    head = f'<h2 id="mistakes">{_e(tr("Known mistakes the class makes"))}</h2>\n'
    if not summary.mistakes:
        none = tr("The diagnosis named no known mistake (it names one only where the evidence is unique to it; "
                  "the student release carries no catalogue).")
        return head + f'<p class="note">{_e(none)}</p>'
    rows = []
    for mistake in summary.mistakes:
        who = links(mistake.ids)
        rows.append(f"<tr><td class=n>{mistake.count}</td><td><strong>{_e(mistake.exercise)}</strong>: "
                    f"{_e(mistake.name)}<br><span class=note>{_e(mistake.explanation)}</span></td><td>{who}</td></tr>")
    note = tr("Over the {count} graded submissions, the most frequent first.", count=summary.scored)
    return (head + f"<p class=note>{_e(note)}</p>\n<table><tr><th>{_e(tr('Students'))}</th>"
            f"<th>{_e(tr('Mistake'))}</th><th>{_e(tr('Who'))}</th></tr>" + "".join(rows) + "</table>")


def _imports(summary: ClassSummary) -> str:
    if not summary.did_not_import:
        return ""
    rows = "".join(
        f"<tr><td class=n>{failure.count}</td><td><strong>{_e(failure.exercise)}</strong><br>"
        f"<span class=note>{_e(failure.example)}</span>{_from(failure.example_from)}</td><td>{links(failure.ids)}</td>"
        "</tr>"
        for failure in summary.did_not_import)
    note = tr("A syntax error or a missing name stops every test of the exercise at its import, and every exercise "
              "built on it is blocked: one slip, many points. These tests are left out of the tests most students "
              "fail.")
    return (f'<h2 id="did-not-import">{_e(tr("Files that did not import"))}</h2>\n<p class=note>{_e(note)}</p>\n'
            f"<table><tr><th>{_e(tr('Students'))}</th><th>{_e(tr('Exercise, and one failure'))}</th>"
            f"<th>{_e(tr('Who'))}</th></tr>{rows}</table>")


def _not_graded(summary: ClassSummary) -> str:
    """Who was not graded (refused, over the time limit, the grader's own error) and who hit a worker's limit."""
    if not summary.limits:
        return ""
    rows = "".join(f'<tr><td><a href="#{anchor(hit.id)}">{_e(hit.id)}</a></td><td>{_e(hit.status)}</td>'
                   f'<td>{_e(", ".join(hit.limits))}</td><td>{_e(hit.reason)}</td></tr>' for hit in summary.limits)
    note = tr("Refused, limit and grader-error submissions are left out of the mean and the charts; a graded one "
              "whose tests a timeout, crash or memory limit stopped lost those tests' points and is counted.")
    headings = "".join(f"<th>{_e(tr(heading))}</th>" for heading in (N_("Submission"), N_("Status"), N_("What"),
                                                                      N_("Reason")))
    return (f'<h2 id="not-graded">{_e(tr("Not graded, or stopped by a limit"))}</h2>\n<p class=note>{_e(note)}</p>\n'
            f"<table><tr>{headings}</tr>{rows}</table>")


def _from(submission_id: str) -> str:
    """Whose words an example message is: a student's text is never shown as the kit's, or the class's."""
    return f'<br><span class=note>{_e(tr("the most frequent message; first from"))} {links([submission_id])}</span>' \
        if submission_id else ""


def _prose(text: str) -> str:
    """Translated text as HTML: escaped, its `code` spans in <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(clean(text), quote=False))


def _e(text: object) -> str:
    return html.escape(clean(str(text)), quote=True)


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path, ".tmp") as temporary:
        temporary.write_text(text, encoding="utf-8")
