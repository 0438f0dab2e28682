"""Messages that point at the real cause, each tried the way a student meets it: a submission in the
wrong folder, softmax over the wrong axis, the first run on untouched stubs, a list of blockers, a
SyntaxError, a corrupt zip, a GPU that is not there, a terminal that cannot show every character."""

from __future__ import annotations

import itertools
import json
import shutil
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from grader.judge import variants

REPO = Path(__file__).resolve().parents[2]
STUBS, SOLUTIONS = REPO / "exercises", REPO / "solutions"
SYNTAX_ERROR = "import torch\n\n\ndef attention(query, key, value, dropout=None, mask=None)\n    return 1\n"


def one_line_usage_error(run) -> str:
    assert run.returncode == 2, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.describe()
    return lines[0]


def known_mistake(exercise: str, name: str) -> variants.Variant:
    return next(mistake for mistake in variants.mistakes(exercise) if mistake.name == name)


def zip_folder(folder: Path, archive: Path, *, under: str) -> Path:
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(folder.glob("*.py")):
            out.write(path, f"{under}/{path.name}")
    return archive


def copy_exercise_files(source: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    for path in source.glob("*.py"):
        shutil.copyfile(path, into / path.name)
    return into


# --- where the exercise files are ---------------------------------------------------------------


@pytest.mark.parametrize("under", ["my-kit/exercises", "Downloads/hw3/attention-kit/exercises"])
def test_a_zip_with_the_exercises_in_nested_folders_is_graded(grader_cli, tmp_path: Path, under):
    archive = zip_folder(SOLUTIONS, tmp_path / "alice.zip", under=under)
    run = grader_cli.check(archive, tmp_path / "report.json")
    assert run.returncode == 0, run.describe()
    assert run.exercise("attention")["score"] == 10, run.feedback("attention")


def test_a_folder_with_the_exercises_in_nested_folders_is_graded(grader_cli, tmp_path: Path):
    copy_exercise_files(SOLUTIONS, tmp_path / "alice" / "my-kit" / "exercises")
    run = grader_cli.check(tmp_path / "alice", tmp_path / "report.json")
    assert run.returncode == 0, run.describe()
    assert run.exercise("attention")["score"] == 10, run.feedback("attention")


def test_a_folder_without_exercise_files_is_one_line_saying_where_it_looked(grader_cli, tmp_path: Path):
    (tmp_path / "alice" / "notes").mkdir(parents=True)
    (tmp_path / "alice" / "notes" / "readme.txt").write_text("my homework\n")
    line = one_line_usage_error(grader_cli.run("check", "--submission", str(tmp_path / "alice")))
    assert "no exercise file found in the folder" in line and "alice" in line, line
    assert "attention.py" in line and "transformer.py" in line and "exercises/" in line, line
    assert "rope.py" in line and "tiny_gpt.py" in line, line  # the second track's too


def test_a_zip_without_exercise_files_is_one_line_saying_where_it_looked(grader_cli, tmp_path: Path):
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("my-kit/exercises/attention.ipynb.txt", "nothing to grade\n")
    line = one_line_usage_error(grader_cli.run("check", "--submission", str(archive)))
    assert "no exercise file found in alice.zip" in line and "attention.py" in line, line


def test_batch_refuses_a_submission_without_exercise_files_with_the_reason(grader_cli, tmp_path: Path):
    (tmp_path / "class" / "bob" / "notes").mkdir(parents=True)
    out = tmp_path / "grades"
    run = grader_cli.run("batch", str(tmp_path / "class"), "--out", str(out), "--suite", "public", "--jobs", "1")
    assert run.returncode == 0, run.describe()
    report = json.loads((out / "bob.json").read_text())
    assert report["status"] == "refused", report
    assert any("no exercise file found" in warning for warning in report["warnings"]), report["warnings"]
    assert "no exercise file found" in run.stdout, run.stdout


def test_a_corrupt_zip_is_not_a_valid_zip_archive(grader_cli, tmp_path: Path):
    archive = tmp_path / "alice.zip"
    archive.write_bytes(b"PK\x03\x04 this is not really a zip")
    line = one_line_usage_error(grader_cli.run("check", "--submission", str(archive)))
    assert "alice.zip is not a valid zip archive" in line, line


# --- what a failure says ------------------------------------------------------------------------


def test_softmax_over_the_wrong_axis_gets_the_hint_of_its_diagnosis(grader_cli, tmp_path: Path):
    submission = tmp_path / "sub"
    submission.mkdir()
    variants.write(known_mistake("attention", "softmax_over_queries"), submission)
    run = grader_cli.check(submission, tmp_path / "report.json")
    assert run.returncode == 0, run.describe()
    feedback = run.feedback("attention")
    assert "mask == 0" not in feedback, f"a masking hint for a softmax over the wrong axis:\n{feedback}"
    assert feedback.count("Diagnosis: ") == 1 and "query axis" in feedback, feedback
    masked = [t["message"] for t in run.lost_tests("attention") if "blocked_keys" in t["name"]]
    assert masked and all("Hint: " in m and "query axis" in m for m in masked), feedback


def test_untouched_stubs_get_one_next_step_naming_the_file_graded(grader_cli, tmp_path: Path):
    copy_exercise_files(STUBS, tmp_path / "homework")
    run = grader_cli.run("check", "--submission", "homework", "--suite", "public", cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    steps = [line for line in run.stdout.splitlines() if "open " in line]
    assert len(steps) == 1, f"expected one next step:\n{run.stdout}"
    assert "start with attention: open homework/attention.py" in steps[0], steps[0]
    assert "blocked by" not in run.stdout and "✘" not in run.stdout, run.stdout


def test_one_untouched_exercise_names_its_file(grader_cli, tmp_path: Path):
    copy_exercise_files(STUBS, tmp_path / "exercises")
    run = grader_cli.run("check", "attention", "--submission", "exercises", "--suite", "public", cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    assert "attention: not implemented yet — open exercises/attention.py" in run.stdout, run.stdout


def test_blocked_by_a_list_reads_as_a_plural(grader_cli, tmp_path: Path):
    """A MultiHeadAttention that calls attention() and causal_mask, both wrong: blocked by both, in one sentence."""
    submission = copy_exercise_files(SOLUTIONS, tmp_path / "sub")
    shutil.copyfile(REPO / "tests" / "kit" / "submissions" / "multi_head_attention" / "correct" / "reuses_attention.py",
                    submission / "multi_head_attention.py")
    variants.write(known_mistake("attention", "no_scaling"), submission)
    masking = (submission / "masking.py").read_text()  # and a causal mask that hides nothing
    (submission / "masking.py").write_text(masking + "\n\ndef causal_mask(seq_len):\n"
                                           "    return torch.zeros(1, 1, seq_len, seq_len)\n")
    run = grader_cli.check(submission, tmp_path / "report.json", "attention", "masking", "multi_head_attention",
                           "--suite", "public")
    assert run.returncode == 0, run.describe()
    blocked = [t["message"] for t in run.lost_tests("multi_head_attention")]
    assert blocked, run.feedback("multi_head_attention")
    assert all(m.startswith("blocked by attention and masking: they fail their own tests and multi_head_attention "
                            "builds on them, so fix them first.") for m in blocked), blocked[0]


def test_a_wrong_prerequisite_blocks_an_exercise_checked_alone(grader_cli, tmp_path: Path):
    """A causal_mask that blocks the diagonal and an attention() that is wrong too, under the reference
    MultiHeadAttention (which calls causal_mask, never attention()), `grader check multi_head_attention` alone: blocked
    by masking only, each failure pointing at masking, never at the NaN's causes in the attention's own code; the
    report lists the exercise checked only. With a wrong attention() and a wrong causal_average, neither of which it
    uses, a MultiHeadAttention that scales by sqrt(dim) is not blocked: its failures keep their own hints."""
    wrong = copy_exercise_files(SOLUTIONS, tmp_path / "wrong")
    variants.write(known_mistake("masking", "causal_mask_blocks_diagonal"), wrong)
    variants.write(known_mistake("attention", "softmax_over_queries"), wrong)
    run = grader_cli.check(wrong, tmp_path / "wrong.json", "multi_head_attention", "--suite", "public")
    assert run.returncode == 0, run.describe()
    assert [e["id"] for e in run.report["exercises"]] == ["multi_head_attention"], run.report["exercises"]
    assert run.exercise("multi_head_attention")["blocked_by"] == ["masking"], run.feedback("multi_head_attention")
    assert "blocked by masking" in run.stdout, run.stdout
    lost = [t for t in run.lost_tests("multi_head_attention")
            if not any(c.startswith("waits:") for c in t.get("causes", ()))]
    assert lost, run.feedback("multi_head_attention")
    for test in lost:
        assert test["message"].startswith("blocked by masking:"), test["message"]
        # The one hint is masking's: none of the test's own (a NaN's, about the attention's softmax) is left.
        assert test["message"].count("Hint:") == 1, test["message"]
        assert "Hint: masking fails its test test_causal_mask" in test["message"], test["message"]
    own = copy_exercise_files(SOLUTIONS, tmp_path / "own")
    variants.write(known_mistake("masking", "divides_by_T"), own)
    variants.write(known_mistake("attention", "softmax_over_queries"), own)
    variants.write(known_mistake("multi_head_attention", "scale_by_dim"), own)
    run = grader_cli.check(own, tmp_path / "own.json", "multi_head_attention", "--suite", "public")
    assert run.returncode == 0, run.describe()
    assert run.exercise("multi_head_attention")["blocked_by"] == [], run.feedback("multi_head_attention")
    lost = run.lost_tests("multi_head_attention")
    assert lost and not any("blocked by" in test["message"] or "fails its test" in test["message"] for test in lost)
    assert any("sqrt(head_dim)" in test["message"] for test in lost), run.feedback("multi_head_attention")


def test_a_syntax_error_names_its_location_once(grader_cli, tmp_path: Path):
    submission = tmp_path / "sub"
    submission.mkdir()
    (submission / "attention.py").write_text(SYNTAX_ERROR)
    run = grader_cli.check(submission, tmp_path / "report.json", "attention", "--suite", "public")
    assert run.returncode == 0, run.describe()
    for test in run.lost_tests("attention"):
        assert "SyntaxError" in test["message"] and test["message"].count("line 4") == 1, test["message"]
        # The error names its own cause: no test's hint about another one (dropout, masks) rides along.
        assert "Hint:" not in test["message"], test["message"]


def test_an_undefined_name_is_shown_once_without_hints_about_other_causes(grader_cli, tmp_path: Path):
    """A NameError fails every test alike: its message names the cause, so no test's hint about the symptom it looks
    for is attached, and the terminal shows it once, then how many more tests fail the same way."""
    submission = copy_exercise_files(SOLUTIONS, tmp_path / "sub")
    source = (submission / "multi_head_attention.py").read_text()
    typo = source.replace("/ math.sqrt(self.head_dim)", "/ math.sqrt(head_dimension)")
    assert typo != source
    (submission / "multi_head_attention.py").write_text(typo)
    run = grader_cli.check(submission, tmp_path / "report.json", "multi_head_attention")
    assert run.returncode == 0, run.describe()
    named = [t["message"] for t in run.lost_tests("multi_head_attention") if "NameError" in t["message"]]
    assert len(named) > 5 and not any("Hint:" in m for m in named), named[:3]
    assert run.stdout.count("name 'head_dimension' is not defined") == 1, run.stdout
    assert f"and {len(named) - 1} more tests fail the same way" in run.stdout, run.stdout
    waiting = [line for line in run.stdout.splitlines() if "counts once" in line]
    assert waiting and all(line.startswith("◐ test_") for line in waiting), run.stdout  # pending, not failed


# --- the machine and the terminal ---------------------------------------------------------------


def test_cuda_on_a_machine_without_it_fails_at_once(grader_cli, tmp_path: Path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for command in (["check", "attention", "--submission", str(SOLUTIONS)],
                    ["batch", str(tmp_path), "--out", str(tmp_path / "out")]):
        started = time.monotonic()
        line = one_line_usage_error(grader_cli.run(*command, "--device", "cuda"))
        assert "CUDA is not available" in line and "--device cpu" in line, line
        assert time.monotonic() - started < 5, f"{command[0]} took {time.monotonic() - started:.1f} s to refuse"


EMOJI_NAME = "学生😀"  # GB2312 has the Chinese characters, not the emoji
NOISY = ("def causal_mask(seq_len, device=None):\n"
         "    print('données 😀 \\u2603')\n"
         "    raise ValueError('résultat ✓ 😀')\n")


@pytest.mark.parametrize("encoding", ["gb2312", "gbk", "ascii"])
def test_a_terminal_that_cannot_show_a_character_never_crashes(grader_cli, grader_env, tmp_path: Path,
                                                               encoding: str):
    """In Chinese (the locale says so) on a console that cannot write every character: nothing crashes, and no mark
    is lost. A right attention that prints what the console cannot show keeps its points; a masking that raises
    with such words fails, saying so."""
    env = {**grader_env, "PYTHONIOENCODING": encoding, "LANG": "zh_CN.GB2312"}
    (tmp_path / "class" / EMOJI_NAME).mkdir(parents=True)
    right = (SOLUTIONS / "attention.py").read_text().replace(
        "    d_k = query.size(-1)\n", "    print('données 😀 \\u2603 注意力')\n    d_k = query.size(-1)\n", 1)
    assert "注意力" in right
    (tmp_path / "class" / EMOJI_NAME / "attention.py").write_text(right)
    (tmp_path / "class" / EMOJI_NAME / "masking.py").write_text(NOISY)
    submission = str(tmp_path / "class" / EMOJI_NAME)
    runs = [grader_cli.run("check", "attention", "masking", "--submission", submission, "--suite", "public", env=env,
                           cwd=tmp_path, json_path=tmp_path / "report.json")]
    scores = {exercise["id"]: exercise["score"] for exercise in runs[0].report["exercises"]}
    assert scores == {"attention": 10.0, "masking": 0.0}, scores
    if encoding == "gb2312":
        others = [
            ("batch", str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--suite", "public", "--jobs", "1"),
            ("show", "attention", "--submission", submission),
            ("watch", "attention", "--submission", submission, "--max-runs", "1"),
            ("list",), ("hint", "attention"),
        ]
        with ThreadPoolExecutor(2) as pool:  # independent commands, two at a time: one per core
            runs += pool.map(lambda args: grader_cli.run(*args, env=env, cwd=tmp_path), others)
    for run in runs:
        assert run.returncode in (0, 1), run.describe()  # show exits 1: the attention it drew failed
        assert "Traceback" not in run.stderr and "UnicodeEncodeError" not in run.stdout + run.stderr, run.describe()
    assert "ValueError" in runs[0].stdout, runs[0].describe()


@pytest.mark.parametrize("encoding, passed, failed", [("utf-8", "✔", "✘"), ("gb2312", "√", "×"), ("gbk", "√", "×"),
                                                      ("cp936", "√", "×"), ("ascii", "PASS", "FAIL")])
def test_passing_and_failing_tests_keep_distinct_marks_in_every_encoding(encoding: str, passed: str, failed: str):
    """A legacy Chinese console (GB2312, GBK) cannot write ✔ or ✘: each would print as '?', and with -v a passing test
    would look like a failing one. Each encoding gets marks it can write, and they differ."""
    import io

    from rich.console import Console

    from grader.grade.reports import GradeReport
    from grader.grade.scoring import score
    from grader.view.render import render

    tests = [{"nodeid": f"tests/public/test_attention.py::test_{name}", "outcome": outcome,
              "metadata": {"exercise": "attention", "points": 1, "message": "" if outcome == "passed" else "wrong"}}
             for name, outcome in (("right", "passed"), ("wrong", "failed"))]
    report = GradeReport("sub", "public", "cpu", 1.0, torch.__version__, tuple(score({"tests": tests}, ["attention"])))
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="replace")
    render(report, Console(file=stream, highlight=False, no_color=True, width=100), verbose=True)
    stream.flush()
    shown = raw.getvalue().decode(encoding).splitlines()
    assert f"{passed} test_right (attention)" in shown, shown
    assert f"{failed} test_wrong (attention)" in shown, shown
    assert not any(line.startswith("?") or "? " in line for line in shown), shown


def test_a_nan_gets_the_hint_for_a_nan_not_the_tests_hint_for_wrong_values():
    """softmax(dim=-2) under a key mask fills the blocked columns with NaN: what follows is about NaN, not masks."""
    from grader.judge.checks import NAN_HINT, assert_close

    got = torch.tensor([0.5, float("nan")])
    with pytest.raises(AssertionError) as failure:
        assert_close(got, torch.tensor([0.5, 0.0]), atol=0.0, name="weights of blocked keys",
                     hint="mask is a keep mask: set scores where mask == 0 to -inf before the softmax.")
    assert "1 NaN value," in str(failure.value) and NAN_HINT in str(failure.value)
    assert "keep mask" not in str(failure.value), str(failure.value)


def test_a_hint_that_closes_every_failure_of_an_exercise_is_said_once_in_the_terminal():
    """A diagnosis explains each failure of its exercise; the terminal says it once, then "as above", while the
    report keeps every message whole (Gradescope shows each test alone)."""
    from rich.console import Console

    from grader.grade.reports import GradeReport
    from grader.grade.results import ExerciseResult
    from grader.grade.results import TestOutcome as Outcome
    from grader.grade.results import TestResult as Result_
    from grader.view.render import render

    cause = "blocked weights are zeroed after the softmax: fill the blocked scores with -inf before it."
    messages = (f"rows differ.\nDiagnosis: {cause}", f"p_attn differs at (0, 1). Hint: {cause}",
                f"p_attn differs at (1, 0). Hint: {cause}", "output differs. Hint: another cause.")
    tests = tuple(Result_(f"hidden/test_attention.py::test_{i}", Outcome.FAILED, 0.0, 2.5, message)
                  for i, message in enumerate(messages))
    report = GradeReport("s", "all", "cpu", 1.0, "2.13.0", (ExerciseResult("attention", 0.0, 10.0, tests),))
    console = Console(record=True, width=400, color_system=None)
    render(report, console)
    shown = console.export_text()
    assert shown.count(cause) == 1 and shown.count("Hint: as above.") == 2 and "Hint: another cause." in shown
    assert all(test.message in messages for test in report.exercises[0].tests)  # the report itself is unchanged


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_line_of_the_submission_is_quoted_as_code_and_chinese_sentences_close_up(language, monkeypatch):
    """A line of code in a message is in backticks, never inside the sentence's own brackets, where `T = x.size(1)`
    would read `T = x.size(1` in Chinese (its bracket taken for the sentence's); and Chinese sets no space after a
    full stop or colon where sentences are joined English-fashion ("。 提示：")."""
    from grader import lang
    from grader.grade.scoring import score
    from grader.host.failures import submission_failure
    from grader.host.limits import Limits

    monkeypatch.setattr(lang, "_active", lang.translations(language))
    error = {"type": "RuntimeError", "message": "boom", "where": {"file": "masking.py", "line": 42,
                                                                  "code": "T = x.size(1)"}}
    shown = str(submission_failure(error, "causal_mask", Limits.from_environment()))
    assert "`T = x.size(1)`" in shown and ("line 42" if language == "en" else "第 42 行") in shown, shown
    message = lang.tr("{name} has shape {shape}, expected {expected}.", name="out", shape=(2,), expected=(3,))
    report = {"tests": [{"nodeid": "tests/public/test_masking.py::test_x", "outcome": "failed",
                         "metadata": {"exercise": "masking", "message": message + " " + lang.tr("Hint: as above.")}}]}
    [result] = score(report, ["masking"])
    joined = result.tests[0].message
    assert ("。提" in joined and "。 " not in joined) if language == "zh" else ". Hint" in joined, joined


def test_a_count_agrees_with_its_noun_in_english_and_reads_the_same_in_chinese(monkeypatch):
    """"1 NaN value" and "144 NaN values", never "value(s)": English's two forms chosen by the count (lang.plural)."""
    from grader import lang
    from grader.judge.checks import assert_close

    for language, one, many in (("en", "has 1 NaN value, at", "has 144 NaN values, first at"),
                                ("zh", "中有 1 个 NaN 值", "中有 144 个 NaN 值")):
        monkeypatch.setattr(lang, "_active", lang.translations(language))
        for count, said in ((1, one), (144, many)):
            out = torch.zeros(200)
            out[:count] = float("nan")
            with pytest.raises(AssertionError) as failure:
                assert_close(out, torch.zeros(200), atol=1e-6, name="out")
            assert said in str(failure.value) and "(s)" not in str(failure.value), str(failure.value)
        cells = lang.plural(1, lang.N_("1 code cell"), lang.N_("{count} code cells"))
        assert cells == {"en": "1 code cell", "zh": "1 个代码单元格"}[language], cells


_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"


@pytest.mark.parametrize("width", [60, 80])
@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_terminal_breaks_lines_between_chinese_characters_and_never_inside_a_name(language, width, monkeypatch):
    """At 60 and 80 columns, in both languages: every line fits; Chinese fills each line, broken between characters
    (rich alone breaks only at spaces, leaving a gap as long as a sentence); no word, identifier or test name is cut
    (`cross-attenti` / `on`), a name too long for a line broken only at its own spaces."""
    import re

    from rich.cells import cell_len
    from rich.console import Console

    from grader import lang
    from grader.grade.reports import GradeReport
    from grader.grade.results import ExerciseResult
    from grader.grade.results import TestOutcome as Outcome
    from grader.grade.results import TestResult as Result_
    from grader.judge.checks import NAN_HINT
    from grader.view.render import render

    monkeypatch.setattr(lang, "_active", lang.translations(language))
    hint = lang.tr("Hint: {hint}", hint=lang.tr(NAN_HINT))
    messages = [lang.tr("{name} has {count} NaN values, first at index {index}; expected {expected}.", name="p_attn",
                        count=144, index=(0, 3), expected=0) + " " + hint,
                lang.tr("{name} differs from the expected value at index {index}: got {got}, expected {expected} "
                        "(error {error}, tolerance {tolerance}); {count} of {total} values are off.",
                        name="MultiHeadAttention.forward(q, kv, kv)", index=(1, 4, 2), got=0.25, expected=0.75,
                        error=0.5, tolerance=0.001, count=12, total=480)]
    names = ["test_output_has_the_shape_of_the_queries[cross-attention, T_q != T_k]",
             "test_future_tokens_do_not_leak_through_the_mask[cross-attention]"]
    tests = tuple(Result_(f"public/test_multi_head_attention.py::{name}", Outcome.FAILED, 0.0, 1.0, message)
                  for name, message in zip(names, messages, strict=True))
    report = GradeReport("s", "public", "cpu", 1.0, "2.13.0", (ExerciseResult("multi_head_attention", 0.0, 10.0,
                                                                                     tests),))
    console = Console(record=True, width=width, color_system=None, force_terminal=True)
    render(report, console)
    lines = console.export_text().splitlines()
    assert all(cell_len(line) <= width for line in lines), lines
    assert not re.search("[。：；，] +\\S", "\n".join(lines)), lines  # no space after full-width punctuation
    assert all(any(code in line for line in lines) for code in ("`grader hint multi_head_attention`", "(0, 3)",
                                                                 "(1, 4, 2)")), lines  # code, indices: whole
    for name in names:
        pieces = [name] if cell_len(name) + 2 <= width else re.split(r" |(?=\[)", name)
        assert all(any(piece in line for line in lines) for piece in pieces), (name, lines)
    feedback = [line.rstrip() for line in lines if line.startswith("    ")]
    for message in messages:
        for word in re.findall(f"[^\\s{_CJK}]+", message):
            assert any(word in line for line in feedback), (word, feedback)
    for line, after in itertools.pairwise(lines):  # the lines of one message: each but the last is full
        if not (line.startswith("    ") and after.startswith("    ")):
            continue
        line = line.rstrip()
        following = after.strip()
        first = following[0] if re.match(f"[{_CJK}]", following) else re.match(f"[^\\s{_CJK}]+", following).group()
        # Chinese punctuation never starts a line, so a character may go down with it: a gap of a few cells at most.
        assert width - cell_len(line) < cell_len(first) + 1 + 4, (line, after)


@pytest.mark.parametrize(("encoding", "bullet"), [("utf-8", "•"), ("gb2312", "・"), ("ascii", "-")])
def test_a_hints_bullets_survive_the_consoles_encoding(encoding, bullet, monkeypatch):
    """rich's Markdown bullet "•" is not in GB2312 and printed as "?" on a Chinese Windows console."""
    import io

    from rich.console import Console
    from rich.panel import Panel

    from grader import lang
    from grader.student.hints import HINTS
    from grader.view.breaking import markdown

    monkeypatch.setattr(lang, "_active", lang.translations("zh"))
    hint = next(lang.tr(text) for text in HINTS["attention"] if "\n- " in text)
    written = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")
    Console(file=written, width=60, color_system=None, force_terminal=True).print(Panel(markdown(hint)))
    written.flush()
    shown = written.buffer.getvalue().decode(encoding)
    items = [line for line in shown.splitlines() if line.lstrip("|│ ").startswith(bullet)]
    assert len(items) == hint.count("\n- "), shown
    assert "?" not in shown or encoding == "ascii", shown
