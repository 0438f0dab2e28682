"""`class_sections` writes the parts of report.html that answer "who needs help, and with what": the students who
need help, the student table ordered by total with every student also found by name and by status, and the tests
the class fails most, grouped by cause.

What a student needs help with is read from the report's structured fields (statuses, `blocked_by`, `causes`,
`diagnosed`), never from a message's words; the one message shown, a student's first problem, is the kit's own
feedback in the batch's language, and where that feedback is a structure test waiting for a behaviour test, the
behaviour test's problem is shown instead.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from urllib.parse import quote

from grader.batch.failing import LIMITS, UNDIAGNOSED, excerpt, first_line, waits_for
from grader.batch.jobs import Result, Status
from grader.batch.summary import CSV_STATUS, ClassSummary, diagnosed, did_not_import, judges_own_code
from grader.grade.reports import GradeReport
from grader.grade.results import ExerciseResult, ExerciseStatus, TestOutcome
from grader.grade.selection import Selection
from grader.lang import N_, listed, plural, tr
from grader.text import clean
from grader.view.render import points

FEEDBACK_FOLDER = "feedback"
FIRST_PROBLEM_CHARACTERS = 200
LOW_SHARE = 0.5  # a graded total under this share of the points is a low one
STUCK_SHARE = 0.1  # stuck at an exercise: the exercises blocked by it lost at least this share of the points


@dataclass(frozen=True)
class Standing:
    """Where one submission stands: its status, total, why it needs help (empty: it does not) and its first
    problem in plain words."""

    id: str
    status: str  # as grades.csv names it
    total: float | None  # None where it was not graded
    needs: tuple[str, ...]
    first_problem: str

    @property
    def order(self) -> tuple[int, float, str]:
        """Lowest total first; those without a total (not graded) before every one."""
        return (self.total is not None, self.total or 0.0, self.id)


def standings(results: list[Result], reports: dict[str, GradeReport | None], maximum: float) -> list[Standing]:
    """Every submission's standing, lowest total first."""
    found = []
    for result in results:
        report = reports[result.id]
        status = CSV_STATUS[result.ended]
        if report is None or result.ended != Status.GRADED:
            reason = str((result.report.get("warnings") or [""])[0])
            found.append(Standing(result.id, status, None, (tr("not graded: {status}", status=status),),
                                  excerpt(reason, FIRST_PROBLEM_CHARACTERS)))
            continue
        total = float(result.report.get("score", 0.0))
        found.append(Standing(result.id, status, total, _needs(report, total, maximum),
                              first_problem(report.exercises)))
    return sorted(found, key=lambda standing: standing.order)


def _needs(report: GradeReport, total: float, maximum: float) -> tuple[str, ...]:
    """Why a graded student needs help, most telling first; () when they do not."""
    exercises = report.exercises
    needs = []
    if exercises and all(e.status in (ExerciseStatus.NOT_STARTED, ExerciseStatus.NOT_SUBMITTED) for e in exercises):
        needs.append(tr("not started: every exercise is still the stub"))
    else:
        blockers = [x for e in exercises for x in e.blocked_by]
        if blockers:
            stuck = blockers[0]
            blocked = [e for e in exercises if stuck in e.blocked_by]
            lost = sum(e.max_score - e.score for e in blocked)
            if maximum and lost >= STUCK_SHARE * maximum:
                needs.append(plural(len(blocked), N_("stuck at {exercise}: {count} exercise built on it is blocked, "
                                                     "{points} points lost there"),
                                    N_("stuck at {exercise}: {count} exercises built on it are blocked, {points} "
                                       "points lost there"), exercise=stuck, points=points(lost)))
        if maximum and total < LOW_SHARE * maximum:
            needs.append(tr("under half the points"))
    if any(cause in LIMITS for e in exercises for t in e.tests for cause in t.causes):
        needs.append(tr("a limit stopped some tests"))
    return tuple(needs)


def first_problem(exercises: tuple[ExerciseResult, ...] | list[ExerciseResult]) -> str:
    """The first problem of the first exercise, in curriculum order, that is not done and not blocked (a blocked
    one waits for an earlier one): not submitted, not started, a file that did not import, or the first failing
    test's message;
    a structure test waiting for a behaviour test gives the behaviour test's message, or says to fix it first."""
    for exercise in exercises:
        if exercise.absent:
            return _of(exercise.id, exercise.absent)
        if exercise.status == ExerciseStatus.NOT_STARTED and not exercise.blocked_by:
            return tr("{exercise}: not started (still the stub)", exercise=exercise.id)
        if not judges_own_code(exercise) or exercise.status != ExerciseStatus.FAILING:
            continue
        if line := did_not_import(exercise):
            return _of(exercise.id, line)
        failed = [t for t in exercise.tests
                  if t.outcome in (TestOutcome.FAILED, TestOutcome.ERROR) and t.max_points > 0]
        own = next((t for t in failed if not waits_for(t) and not t.stopped("blocked")), None)
        if own is not None:
            return _of(exercise.id, first_line(own.message) or tr("failed"))
        waited = [name for t in failed for name in waits_for(t)]
        if waited:
            return tr("{exercise}: fix {tests} first: the tests of names and shapes count once it passes",
                      exercise=exercise.id, tests=listed(list(dict.fromkeys(waited))))
    return ""


def _of(exercise: str, problem: str) -> str:
    return tr("{exercise}: {problem}", exercise=exercise, problem=excerpt(problem, FIRST_PROBLEM_CHARACTERS))


def needs_help(standings_: list[Standing]) -> str:
    """The "Needs help" section: who, why, and their first problem, lowest total first."""
    head = f'<h2 id="needs-help">{_e(tr("Needs help"))}</h2>\n'
    listed_ = [s for s in standings_ if s.needs]
    if not listed_:
        nobody = tr("Nobody: every submission was graded, and no student is under half the points, stuck at an "
                    "exercise or stopped by a limit.")
        return head + f'<p class="note">{_e(nobody)}</p>'
    # Translators: between two reasons a student needs help (Chinese: ；).
    between = tr("; ")
    rows = "".join(
        f'<tr><td><a href="#{anchor(s.id)}"><bdi>{_e(s.id)}</bdi></a></td><td>{_e(s.status)}</td>'
        f"<td class=n>{_total(s)}</td><td>{_e(between.join(s.needs))}</td><td>{_e(s.first_problem)}</td></tr>"
        for s in listed_)
    note = tr("Not graded, not started, stuck at an exercise others build on, under half the points, or stopped by "
              "a limit; the lowest total first. The first problem is the first thing to fix, in the kit's words.")
    return (head + f'<p class="note">{_e(note)}</p>\n<table class="help"><tr><th>{_e(tr("Student"))}</th>'
            f'<th>{_e(tr("Status"))}</th><th>{_e(tr("Total"))}</th><th>{_e(tr("Why"))}</th>'
            f'<th>{_e(tr("First problem"))}</th></tr>{rows}</table>')


def finder(standings_: list[Standing]) -> str:
    """Every student by name and by status, each a link to their row of the table ordered by total."""
    by_name = ", ".join(f'<a href="#{anchor(s.id)}"><bdi>{_e(s.id)}</bdi></a> ({_total(s)})'
                        for s in sorted(standings_, key=lambda s: s.id))
    statuses = []
    for status in CSV_STATUS.values():
        ids = sorted(s.id for s in standings_ if s.status == status)
        if ids:
            statuses.append(f"{_e(status)} ({len(ids)}): {links(ids)}")
    return (f'<p class="finder"><strong>{_e(tr("By name:"))}</strong> {by_name}</p>\n'
            f'<p class="finder"><strong>{_e(tr("By status:"))}</strong> {tr("; ").join(statuses)}</p>')


def students(results: list[Result], selection: Selection, reports: dict[str, GradeReport | None],
             standings_: list[Standing]) -> str:
    """A row of scores per student, lowest total first, and under it what to look at: the diagnosed mistakes, the
    first problem, the feedback that student sees."""
    header = "".join(f"<th>{_e(x).replace('_', '_<wbr>')}</th>" for x in selection.exercises)
    by_id = {result.id: result for result in results}
    rows = []
    for standing in standings_:
        result, report = by_id[standing.id], reports[standing.id]
        exercises = {exercise.id: exercise for exercise in report.exercises} if report is not None else {}
        cells = "".join(_score_cell(exercises.get(x)) for x in selection.exercises)
        rows.append(f'<tr id="{anchor(result.id)}" class="scores"><td><bdi>{_e(result.id)}</bdi></td>'
                    f"<td>{_e(standing.status)}</td><td class=n>{_total(standing)}</td>{cells}</tr>")
        details = [f'<a href="{FEEDBACK_FOLDER}/{quote(result.id)}.txt">{_e(tr("feedback"))}</a>']
        if mistakes := "; ".join(f"{x}: {name}" for x, name in diagnosed(result.report)):
            details.append(_e(tr("diagnosed: {mistakes}", mistakes=mistakes)))
        if standing.first_problem:
            details.append(_e(tr("first problem: {problem}", problem=standing.first_problem)))
        if standing.status == "graded" and (warnings := result.report.get("warnings") or []):
            details.append(_e(tr("warning: {warning}", warning=excerpt(str(warnings[0]), FIRST_PROBLEM_CHARACTERS)))
                           + (_e(tr(" (and {count} more in the feedback)", count=len(warnings) - 1))
                              if len(warnings) > 1 else ""))
        rows.append(f'<tr class="details"><td></td><td colspan="{len(selection.exercises) + 2}">'
                    f"{' · '.join(details)}</td></tr>")
    note = _e(tr("The lowest total first; submissions that were not graded come before every total."))
    return (f'<h2 id="students">{_e(tr("Students"))}</h2>\n<p class="note">{note}</p>\n{finder(standings_)}\n'
            f'<table class="students"><tr><th>{_e(tr("Submission"))}</th><th>{_e(tr("Status"))}</th>'
            f'<th>{_e(tr("Total"))}</th>{header}</tr>' + "".join(rows) + "</table>")


def _score_cell(exercise: ExerciseResult | None) -> str:
    if exercise is None:
        return "<td class=n>–</td>"
    note = ""
    if exercise.absent:
        note = tr("not submitted")
    elif exercise.blocked_by:
        note = tr("blocked by {names}", names=listed(exercise.blocked_by))
    elif exercise.status == ExerciseStatus.NOT_STARTED:
        note = tr("not started")
    elif did_not_import(exercise):
        note = tr("did not import")
    shown = f"<br><span class=note>{_e(note)}</span>" if note else ""
    return f"<td class=n>{points(exercise.score)}{shown}</td>"


def hardest(summary: ClassSummary) -> str:
    """The tests most students fail, each once (its parametrised cases folded), with who fails it for which cause."""
    if not summary.hardest_tests:
        return ""
    rows = []
    for test in summary.hardest_tests:
        exercise, _, name = test.name.partition(": ")
        where, _, function = name.rpartition("::")
        cases = f" · {_e(tr('{count} cases', count=test.cases))}" if test.cases > 1 else ""
        if test.same:
            shown = ", ".join(name.rpartition("::")[2] for name in test.same)
            cases += "<br>" + _e(tr("and the same students fail these for the same causes: {tests}", tests=shown))
        causes = "".join(
            f"<li>{_e(tr('{cause}: {count}', cause=cause_label(found.cause), count=found.count))} ({links(found.ids)})"
            f"<pre>{_e(found.example)}</pre>"
            f"<span class=note>{_said_by(found.example_from, found.count)}</span></li>" for found in test.causes)
        rows.append(f"<tr><td><strong>{_e(exercise)}</strong>: {_e(function)}<br><span class=note>{_e(where)}"
                    f"{cases}</span></td><td class=n>{1 - test.pass_rate:.0%} ({test.failed})</td>"
                    f'<td><ul class="causes">{causes}</ul></td></tr>')
    note = tr("The tests the most students fail, each once: its parametrised cases are folded into it, and a student "
              "counts once. Counted where the test judged the exercise's own code (exercises blocked by a failing "
              "prerequisite, not started, not submitted or that did not import are left out), and not where it only "
              "waited for another test. Failing: the share of those students, and how many. Causes come from the "
              "diagnosis and the grader, never from a message's words.")
    return (f'<h2 id="hardest">{_e(tr("Tests most students fail"))}</h2>\n<p class=note>{_e(note)}</p>\n'
            f'<table class="hardest"><tr><th>{_e(tr("Test"))}</th><th>{_e(tr("Failing"))}</th>'
            f'<th>{_e(tr("Why they fail, and who"))}</th></tr>{"".join(rows)}</table>')


def _said_by(submission_id: str, count: int) -> str:
    """Whose words an example message is: a student's text is never shown as the kit's, or the class's."""
    said = tr("message from") if count == 1 else tr("the most frequent message; first from")
    return f"{_e(said)} {links([submission_id])}"


def cause_label(cause: str) -> str:
    """A cause (`failing.cause_of`) in plain words."""
    if cause.startswith("mistake:"):
        return tr("the known mistake {name}", name=cause.removeprefix("mistake:"))
    return {UNDIAGNOSED: tr("no known mistake named"), "unwritten": tr("code not written yet"),
            "timeout": tr("over the time limit"), "crash": tr("the worker crashed"),
            "memory": tr("out of memory")}.get(cause, cause)


def links(ids: list[str]) -> str:
    """Links to the students' rows."""
    return ", ".join(f'<a href="#{anchor(i)}"><bdi>{_e(i)}</bdi></a>' for i in ids)


def anchor(submission_id: str) -> str:
    return "s-" + quote(submission_id, safe="")


def _total(standing: Standing) -> str:
    return points(standing.total) if standing.total is not None else "–"


def _e(text: object) -> str:
    return html.escape(clean(str(text)), quote=True)
