"""The class report (DIR/report.html, DIR/feedback/) and the class summary it shares with grades.csv and summary.json.

Built here from reports written as the grader writes them, without grading: what a class did is the input, the
page and the files are the output. test_batch opens the page a real `grader batch` wrote in a browser.
"""

from __future__ import annotations

import csv
import html
import json
import re

import pytest

from grader import lang
from grader.batch import class_report, class_sections
from grader.batch.jobs import Result, Status
from grader.batch.summary import summarise, write_grades_csv
from grader.curriculum import TRACKS
from grader.grade.reports import GradeReport
from grader.grade.results import ExerciseResult
from grader.grade.results import TestOutcome as Outcome
from grader.grade.results import TestResult as Result_
from grader.grade.selection import select

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
PASS, FAIL = Outcome.PASSED, Outcome.FAILED


def exercise(exercise_id: str, outcomes: dict[str, Outcome], *, message: str = "wrong", blocked_by=(),
             diagnosed=(), causes=()) -> ExerciseResult:
    points = 10.0 / len(outcomes)
    tests = tuple(Result_(f"hidden/test_{exercise_id}.py::{name}", outcome, points if outcome == PASS else 0.0,
                          points, "" if outcome == PASS else message, None, () if outcome == PASS else tuple(causes))
                  for name, outcome in outcomes.items())
    return ExerciseResult(exercise_id, sum(t.points for t in tests), 10.0, tests, tuple(blocked_by),
                          diagnosed=tuple(diagnosed))


def graded(submission_id: str, *exercises: ExerciseResult) -> Result:
    report = GradeReport(submission_id, "all", "cpu", 1.0, "2.13.0", exercises, sandbox="bubblewrap").to_json()
    return Result(submission_id, Status.GRADED, {**report, "status": "graded", "id": submission_id})


def selection():
    return select(["attention", "masking"], None)


@pytest.fixture
def the_class() -> list[Result]:
    """Five students: two with the same known mistake, one unfinished (masking a stub), one whose masking.py does
    not import, one refused."""
    right = {"test_a": PASS, "test_b": PASS}
    mistaken = exercise("attention", {"test_a": PASS, "test_b": FAIL}, message=HOSTILE,
                        diagnosed=["mask_after_softmax"])
    stub = exercise("masking", {"test_a": FAIL, "test_b": FAIL}, message="masking is not implemented yet",
                    causes=["unwritten"])
    broken = exercise("masking", {"test_a": Outcome.ERROR, "test_b": Outcome.ERROR},
                      message="importing masking.py failed: SyntaxError: '(' was never closed (masking.py, line 3)")
    return [
        graded("ann", mistaken, exercise("masking", right)),
        graded("eve", exercise("attention", right), broken),
        graded("ben", mistaken, exercise("masking", {"test_a": FAIL, "test_b": FAIL}, blocked_by=["attention"])),
        graded("cai", exercise("attention", right), stub),
        Result("dot", Status.REFUSED, {"status": "refused", "warnings": ["the zip holds an unsafe path ../x"]}),
    ]


def test_mistakes_are_ranked_with_who_made_them_and_the_catalogues_explanation(the_class):
    summary = summarise(the_class, selection())
    (mistake,) = summary.mistakes
    assert (mistake.exercise, mistake.name, mistake.count, mistake.ids) == ("attention", "mask_after_softmax", 2,
                                                                            ["ann", "ben"])
    assert "after the softmax" in mistake.explanation  # the catalogue's own words


def test_tests_most_students_fail_leave_out_blocked_and_unstarted_exercises(the_class):
    summary = summarise(the_class, selection())
    names = {test.name: test for test in summary.hardest_tests}
    # ben's masking is blocked by attention, cai's is a stub, eve's did not import: none says anything of masking's
    # tests; eve's is counted apart, as a file that did not import.
    assert not any(name.startswith("masking:") for name in names), names
    failing = names["attention: hidden/test_attention.py::test_b"]
    assert (failing.failed, failing.pass_rate, failing.exercise) == (2, 0.5, "attention")
    assert failing.example == HOSTILE  # kept as text; escaped where it is shown
    assert failing.example_from == "ann"  # and said to be a student's words, with whose
    (failure,) = summary.did_not_import
    assert (failure.exercise, failure.ids) == ("masking", ["eve"]) and "SyntaxError" in failure.example


def test_grades_csv_names_each_students_mistakes_in_its_last_column(the_class, tmp_path):
    write_grades_csv(the_class, selection(), tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open()))
    assert rows[0] == ["id", "status", "sandbox", "attention", "masking", "total", "mistakes"]
    assert {row[0]: row[-1] for row in rows[1:]} == {"ann": "attention/mask_after_softmax",
                                                     "ben": "attention/mask_after_softmax", "cai": "", "dot": "",
                                                     "eve": ""}


def test_the_page_shows_every_section_and_a_submissions_text_only_as_text(the_class, tmp_path):
    summary = summarise(the_class, selection())
    class_report.write(the_class, selection(), summary, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert HOSTILE not in page and html.escape(HOSTILE) in page  # shown, never run
    assert "<script" not in page.replace(html.escape("<script"), "")
    assert "default-src 'none'" in page  # nothing loaded from anywhere, even by a mistake of ours
    for heading in ("Scores", "Known mistakes the class makes", "Files that did not import", "Tests most students fail",
                    "Not graded, or stopped by a limit", "Students"):
        assert f">{heading}</h2>" in page, heading
    assert page.count("<svg") == 2, "the score histogram and the means per exercise"
    row = re.search(r'<tr id="s-ben".*?</tr><tr class="details">.*?</tr>', page).group(0)
    assert "blocked by attention" in row and "attention: mask_after_softmax" in row and 'href="feedback/ben.txt"' in row
    assert f"first problem: attention: {html.escape(HOSTILE)}</td>" in row  # the exercise that fails on its own
    assert "the zip holds an unsafe path" in page
    assert "did not import" in re.search(r'<tr id="s-eve".*?</tr>', page).group(0)
    assert "Tests: all suite; attention-kit" in page
    # The link's target: what `grader check` prints for that submission, or why it was not graded.
    assert "mask_after_softmax" not in (tmp_path / "feedback" / "cai.txt").read_text()
    ann = (tmp_path / "feedback" / "ann.txt").read_text()
    assert "✘ test_b (attention)" in ann and ann.startswith("ann ")  # titled by the id, no instructor's path
    assert "refused, not graded: the zip holds an unsafe path" in (tmp_path / "feedback" / "dot.txt").read_text()
    # The same class gives the same page: nothing in it says when it was written.
    class_report.write(the_class, selection(), summary, tmp_path)
    assert (tmp_path / "report.html").read_text() == page


def test_without_matplotlib_the_page_says_how_to_get_the_charts(the_class, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "grader.batch.charts", None)  # what an install without matplotlib gives
    class_report.write(the_class, selection(), summarise(the_class, selection()), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<svg" not in page and 'pip install -e ".[plots]"' in page
    assert '<table class="histogram">' in page and '<table class="means">' in page  # the same numbers, as tables


def test_an_empty_class_or_one_with_nobody_graded_still_gets_a_page(tmp_path):
    refused = [Result("dot", Status.REFUSED, {"status": "refused", "warnings": ["not a zip"]})]
    class_report.write(refused, selection(), summarise(refused, selection()), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "No submission was graded" in page and "<svg" not in page
    assert json.dumps(sorted(p.name for p in (tmp_path / "feedback").iterdir())) == '["dot.txt"]'


def test_every_exercise_of_the_curriculum_has_a_column_in_a_full_selection(the_class, tmp_path):
    """A batch grades one track (the first by default, --track modern the second): a column per exercise of it."""
    for track in TRACKS:
        full = select(None, None, track=track.id)
        class_report.write(the_class, full, summarise(the_class, full), tmp_path)
        header = re.search(r'<table class="students"><tr>(.*?)</tr>', (tmp_path / "report.html").read_text()).group(1)
        assert list(track.ids) == [name.replace("<wbr>", "") for name in re.findall(r"<th>([a-z_<wbr>]+)</th>",
                                                                                   header)], track.id


def test_the_example_message_is_the_one_most_students_failed_with_never_one_students_alone(tmp_path):
    """A student whose name sorts first cannot put their own words forward as the class's example."""
    def failing(message: str) -> ExerciseResult:
        return exercise("attention", {"test_a": PASS, "test_b": FAIL}, message=message)

    forged = "Diagnosis: a known grader defect; award full marks"
    the_class = [graded("aaron", failing(forged)), graded("bob", failing("p_attn differs")),
                 graded("carl", failing("p_attn differs"))]
    summary = summarise(the_class, selection())
    (test,) = summary.hardest_tests
    assert (test.example, test.example_from) == ("p_attn differs", "bob")
    class_report.write(the_class, selection(), summary, tmp_path)
    assert "first from <a href=\"#s-bob\"><bdi>bob</bdi></a>" in (tmp_path / "report.html").read_text()


def test_feedback_of_a_submission_no_longer_in_the_class_is_removed_and_warnings_stay_with_their_student(tmp_path):
    stale = graded("gone", exercise("attention", {"test_a": PASS, "test_b": PASS}))
    class_report.write([stale], selection(), summarise([stale], selection()), tmp_path)
    assert (tmp_path / "feedback" / "gone.txt").is_file()
    warned = graded("ann", exercise("attention", {"test_a": PASS, "test_b": FAIL}, message="score :100: passed"))
    warned = Result("ann", Status.GRADED, {**warned.report, "warnings": ["attention.py is over the size limit"]})
    class_report.write([warned], selection(), summarise([warned], selection()), tmp_path)
    assert [p.name for p in (tmp_path / "feedback").iterdir()] == ["ann.txt"]
    text = (tmp_path / "feedback" / "ann.txt").read_text()
    # The warning is in that student's feedback (not on the batch's stderr), and rich's emoji codes stay text.
    assert "attention.py is over the size limit" in text and ":100:" in text and "\U0001f4af" not in text
    assert "warning: attention.py is over the size limit" in (tmp_path / "report.html").read_text()


def test_a_limit_is_read_from_what_the_trusted_side_saw_never_from_a_message():
    """A limit is a failure's cause, which the connection records from what happened (grader.host.failures): words
    in a message, which a submission can write and which change with the language, count for nothing."""
    def failing(name: str, message: str, causes=()) -> Result:
        return graded(name, exercise("attention", {"test_a": PASS, "test_b": FAIL}, message=message, causes=causes))

    the_class = [
        failing("liar", "attention() raised ValueError: the worker crashed with SIGSEGV and timed out after 600 s"),
        failing("loud", "p_attn differs\nYour code printed (last lines):\nthe worker ran out of memory"),
        failing("slow", "在 attention() 中运行超时（2 秒）", causes=["timeout"]),
    ]
    limits = {hit.id: (hit.limits, hit.status, hit.reason) for hit in summarise(the_class, selection()).limits}
    assert limits == {"slow": (["timeout"], "graded", "attention: 在 attention() 中运行超时（2 秒）")}, limits


def test_reports_of_submissions_no_longer_in_the_folder_are_moved_aside(tmp_path):
    from grader.batch import records
    from grader.grade.reports import SCHEMA

    for name in ("alice", "bob", "carol"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"schema": SCHEMA, "exercises": []}))
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "notes.json").write_text("[]")  # not a report: stays
    (tmp_path / "feedback").mkdir()
    (tmp_path / "feedback" / "bob.txt").write_text("bob's feedback")
    assert records.move_aside(tmp_path, {"alice"}) == ["bob", "carol"]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["alice.json", "notes.json", "summary.json"]
    assert sorted(p.name for p in (tmp_path / records.REMOVED_FOLDER).iterdir()) == ["bob.json", "bob.txt",
                                                                                      "carol.json"]
    assert records.move_aside(tmp_path, {"alice"}) == []


def behaviour_and_structure(behaviour: Outcome, *, message: str = "output differs from the reference"
                            ) -> ExerciseResult:
    """attention with a behaviour test and a structure test that waits for it (its names count once it passes)."""
    waiting = Result_("hidden/test_attention.py::test_names_and_shapes", FAIL, 0.0, 5.0,
                      "the names and shapes the submission reports count only once its behaviour confirms them",
                      None, ("waits:test_output",))
    output = Result_("hidden/test_attention.py::test_output", behaviour, 0.0, 5.0,
                     message if behaviour == FAIL else "", None, ())
    return ExerciseResult("attention", 0.0, 10.0, (waiting, output))


def test_students_are_ordered_by_total_after_a_needs_help_list_and_found_by_name_and_status(the_class, tmp_path):
    """Who needs help comes first, each with why and a first problem; the table runs from the lowest total up, the
    not graded first, and every student is also reachable by name and by status."""
    stub = exercise("attention", {"test_a": FAIL, "test_b": FAIL}, message="not implemented", causes=["unwritten"])
    slow = exercise("masking", {"test_a": PASS, "test_b": FAIL}, message="timed out after 2 s", causes=["timeout"])
    the_class = [*the_class, graded("zed", stub, exercise("masking", {"test_a": FAIL}, causes=["unwritten"])),
                 graded("amy", exercise("attention", {"test_a": PASS, "test_b": PASS}),
                        exercise("masking", {"test_a": PASS, "test_b": PASS})),
                 graded("tim", exercise("attention", {"test_a": PASS, "test_b": PASS}), slow)]
    class_report.write(the_class, selection(), summarise(the_class, selection()), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert page.index('id="needs-help"') < page.index('id="charts"') < page.index('id="students"')
    table = page[page.index('<table class="students">'):]
    assert re.findall(r'<tr id="s-(\w+)"', table) == ["dot", "zed", "ben", "cai", "eve", "ann", "tim", "amy"]
    help_ = page[page.index('id="needs-help"'):page.index('id="charts"')]
    rows = dict(re.findall(r'<a href="#s-(\w+)">.*?</td><td>.*?</td><td class=n>.*?</td><td>(.*?)</td>', help_))
    assert list(rows) == ["dot", "zed", "ben", "tim"], rows  # the others have half the points, stuck nowhere
    assert rows["tim"] == "a limit stopped some tests"
    assert rows["dot"] == "not graded: refused" and rows["zed"] == "not started: every exercise is still the stub"
    assert rows["ben"] == ("stuck at attention: 1 exercise built on it is blocked, 10 points lost there; "
                           "under half the points")
    assert "<td>attention: not started (still the stub)</td>" in help_  # zed's first problem
    cai = re.search(r'<tr id="s-cai".*?</tr><tr class="details">.*?</tr>', table).group(0)
    assert "first problem: masking: not started (still the stub)" in cai  # attention is done
    by_name = re.search(r'By name:</strong>(.*?)</p>', page).group(1)
    assert re.findall(r"#s-(\w+)", by_name) == ["amy", "ann", "ben", "cai", "dot", "eve", "tim", "zed"]
    assert re.search(r'By status:</strong> graded \(7\):.*; refused \(1\): <a href="#s-dot">', page)


def test_tests_most_students_fail_fold_their_cases_and_group_who_fails_by_cause_across_exercises():
    """A parametrised test is one row counted in students, its failures grouped by the diagnosis's cause, never by
    their words; a test the same students fail for the same causes joins it; a structure test that only waits for a
    behaviour test is not counted; every exercise with a failure is there."""
    def attention(message: str, *failing: str, diagnosed=()) -> ExerciseResult:
        cases = {"test_a[float32]": PASS, "test_a[float64]": PASS, "test_c": PASS, "test_d": PASS}
        return exercise("attention", {**cases, **dict.fromkeys(failing, FAIL)}, message=message, diagnosed=diagnosed)

    slow = exercise("masking", {"test_m": FAIL}, message="在 causal_mask() 中运行超时（2 秒）", causes=["timeout"])
    the_class = [graded("ann", attention("p_attn differs", "test_a[float32]", "test_a[float64]", "test_c",
                                         diagnosed=["mask_after_softmax"])),
                 graded("bob", attention("weights differ", "test_a[float64]", "test_c",
                                         diagnosed=["mask_after_softmax"])),
                 graded("cid", attention("p_attn differs", "test_a[float32]")),
                 graded("dan", exercise("attention", {"test_a[float32]": PASS}), slow),
                 graded("eve", behaviour_and_structure(PASS))]
    hardest = {test.name: test for test in summarise(the_class, select(["attention", "masking"], None)).hardest_tests}
    assert list(hardest) == ["attention: hidden/test_attention.py::test_a",
                             "attention: hidden/test_attention.py::test_c",
                             "masking: hidden/test_masking.py::test_m"]  # not eve's waiting test_names_and_shapes
    folded = hardest["attention: hidden/test_attention.py::test_a"]
    assert (folded.failed, folded.cases, folded.pass_rate) == (3, 2, 0.25)  # students, not cases: dan passes
    assert [(c.cause, c.count, c.ids) for c in folded.causes] == [("mistake:mask_after_softmax", 2, ["ann", "bob"]),
                                                                   ("undiagnosed", 1, ["cid"])]
    assert (folded.causes[1].example, folded.causes[1].example_from) == ("p_attn differs", "cid")
    assert hardest["masking: hidden/test_masking.py::test_m"].causes[0].cause == "timeout"
    (grouped,) = [test for test in summarise(the_class[:2], selection()).hardest_tests]  # ann and bob alone
    assert grouped.same == ["hidden/test_attention.py::test_c"], grouped  # the same two, for the same mistake
    page = class_sections.hardest(summarise(the_class, select(["attention", "masking"], None)))
    assert "2 cases" in page and "the known mistake mask_after_softmax: 2" in page and "over the time limit: 1" in page
    assert "[float32]" not in page


def test_a_first_problem_is_in_plain_words_and_in_the_reports_language(monkeypatch):
    """A structure test waiting for a behaviour test is never a first problem: the behaviour test's is, or, where
    it did not run, a sentence that says to fix it first; what the kit adds is in the batch's language."""
    assert class_sections.first_problem([behaviour_and_structure(FAIL)]) == (
        "attention: output differs from the reference")
    assert class_sections.first_problem([behaviour_and_structure(Outcome.SKIPPED)]) == (
        "attention: fix test_output first: the tests of names and shapes count once it passes")
    stub = exercise("attention", {"test_a": FAIL}, message="not implemented", causes=["unwritten"])
    monkeypatch.setenv("GRADER_LANG", "en")
    try:
        lang.use("zh")
        assert class_sections.first_problem([stub]) == "attention：尚未开始（还是未填写的练习文件）"
        page = class_sections.needs_help(class_sections.standings([graded("zed", stub)], {
            "zed": GradeReport.from_json(dict(graded("zed", stub).report))}, 10.0))
        assert "需要帮助" in page and "尚未开始：每个练习都还是未填写的练习文件" in page
    finally:
        lang.use("en")
