"""The reader's language (issue 33): how it is chosen, and the Chinese catalog's completeness.

Every message the grader passes through `tr`, or marks with `N_` to translate later (the hints), is found by Babel's
own extractor (as `pybabel extract -k N_` would); each must have a Chinese translation with the same placeholders
and the same code (inline spans and code blocks, byte for byte), every translation must be used, and all of them
must be writable on a GB2312 console (Chinese Windows), as the marks are.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import string
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from rich.console import Console

from grader import extract, lang
from grader.cli.main import main
from grader.cli.parse import build_parser
from grader.grade.reports import GradeReport
from grader.grade.results import ExerciseResult
from grader.grade.results import TestOutcome as Outcome
from grader.grade.results import TestResult as Result_
from grader.student.hints import HINTS
from grader.view.render import render

REPO = Path(__file__).resolve().parents[2]
# Where each catalog's messages are written (grader.lang.DOMAINS says where the catalog is).
SOURCES = {"grader": "grader", "public": "tests/public", "hidden": "tests/hidden", "mistakes": "solutions/mistakes"}


@functools.cache
def used_messages(domain: str = "grader") -> dict[str, str]:
    """Every message the domain's code writes (grader.extract: tr, N_, and the judge helpers' name/what/hint):
    {id: where}. Babel's own extractor, run with grader.extract's method, finds the same."""
    found = {}
    folder = REPO / SOURCES[domain]
    for filename, lineno, message, _comments, _context in extract_from_dir(
            folder, method_map=[("**.py", "grader.extract:extract")], keywords={"tr": None}):
        if "locale" not in Path(filename).parts:
            found.setdefault(message, f"{SOURCES[domain]}/{filename}:{lineno}")
    return found


def catalog(domain: str = "grader") -> dict[str, str]:
    path = lang.catalog_path(domain, "zh", REPO)
    if not path.is_file():
        return {}
    with path.open("rb") as handle:
        return {m.id: m.string for m in read_po(handle, locale="zh") if m.id and not m.fuzzy}


def translated_for(domain: str) -> dict[str, str]:
    """What `domain`'s messages are looked up in: its own catalog, then the grader's (which ships everywhere)."""
    return {**catalog("grader"), **catalog(domain)}


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


FENCED = re.compile(r"^```.*?^```", re.S | re.M)
INLINE = re.compile(r"`[^`]+`")  # a span may run over a line break, as Markdown allows


COMMENT = re.compile(r"#[^\n]*")


def code(text: str) -> tuple[Counter[str], Counter[str]]:
    """The fenced code blocks of Markdown `text` (their comments are prose, translated: left out), and its inline
    code spans outside them."""
    blocks = [COMMENT.sub("#", block) for block in FENCED.findall(text)]
    return Counter(blocks), Counter(INLINE.findall(FENCED.sub("", text)))


def test_the_comments_in_the_chinese_hints_code_are_chinese():
    """A level-4 hint's code reads in Chinese too: its comments say in words what a line does, shapes aside."""
    translated = catalog()
    english = [comment for hint in (h for levels in HINTS.values() for h in levels)
               for block in FENCED.findall(translated[hint]) for comment in COMMENT.findall(block)
               if re.search(r"\b[a-z]{3,} [a-z]{3,}\b", comment)]
    assert not english, english


DOMAINS = pytest.mark.parametrize("domain", list(SOURCES))


@DOMAINS
def test_every_message_has_a_chinese_translation_with_the_same_placeholders(domain):
    used, translated = used_messages(domain), translated_for(domain)
    assert len(used) >= 20, used  # the extractor found the messages, not nothing
    po = lang.DOMAINS[domain] + f"/zh/LC_MESSAGES/{domain}.po"
    missing = [f"{where}: {message!r}" for message, where in used.items() if not translated.get(message)]
    assert not missing, f"untranslated (add them to {po}):\n" + "\n".join(missing)
    wrong = [f"{message!r} -> {translated[message]!r}" for message in used
             if fields(message) != fields(translated[message])]
    assert not wrong, "placeholders differ between id and translation:\n" + "\n".join(wrong)


@DOMAINS
def test_every_message_a_student_reads_can_be_translated(domain):
    """A message built as an f-string, or given as bare text, is one no catalog can reach (grader.extract)."""
    found = [f"{path.relative_to(REPO)}:{line}: {why}" for path in sorted((REPO / SOURCES[domain]).rglob("*.py"))
             for line, why in extract.untranslatable(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_the_extractor_finds_every_hint_as_it_is_shown():
    """The hints are marked with `N_` where they are written and translated where they are shown: the extractor must
    find each one exactly as `grader hint` passes it to `tr`, or its translation would never be looked up."""
    used = used_messages()
    hints = [hint for levels in HINTS.values() for hint in levels]
    assert len(hints) >= 27, len(hints)
    unseen = [hint[:60] for hint in hints if hint not in used]
    assert not unseen, f"hints the extractor does not find (mark them with N_): {unseen}"


@DOMAINS
def test_every_translation_keeps_the_code_of_its_message_byte_for_byte(domain):
    """Code is never translated: a hint's code blocks and inline code (`key.transpose(-2, -1)`, `dim=-1`) read the
    same in Chinese, each as often as in English."""
    translated = translated_for(domain)
    wrong = []
    for message in used_messages(domain):
        if translated.get(message):
            (blocks, spans), (their_blocks, their_spans) = code(message), code(translated[message])
            if blocks != their_blocks:
                wrong.append(f"{message[:50]!r}: code blocks differ")
            if spans != their_spans:
                wrong.append(f"{message[:50]!r}: missing {sorted((spans - their_spans).elements())}, "
                             f"extra {sorted((their_spans - spans).elements())}")
    assert not wrong, "translations that change code:\n" + "\n".join(wrong)


@DOMAINS
def test_every_translation_is_used_once_and_writable_on_a_chinese_windows_console(domain):
    used, own = used_messages(domain), catalog(domain)
    assert not set(own) - set(used), f"translations nothing uses: {sorted(set(own) - set(used))}"
    if domain != "grader":
        assert not set(own) & set(catalog("grader")), "translated twice (grader.po already has them)"
    for text in own.values():
        text.encode("gb2312")  # GB2312 (and so GBK) has every character


@pytest.mark.parametrize(("asked", "environment", "chosen"), [
    ("en", {"GRADER_LANG": "zh"}, "en"),  # the command line wins
    (None, {"GRADER_LANG": "zh", "LANG": "en_US.UTF-8"}, "zh"),
    (None, {"LC_ALL": "zh_CN.UTF-8"}, "zh"),
    (None, {"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL overrides LANG, as the C library has it
    (None, {"LC_MESSAGES": "zh_TW.UTF-8"}, "zh"),
    (None, {"LANG": "zh_CN.GB2312"}, "zh"),
    (None, {"LANG": "fr_FR.UTF-8"}, "en"),
    (None, {}, "en"),
])
def test_the_language_comes_from_the_command_line_then_grader_lang_then_the_locale(asked, environment, chosen):
    assert lang.choose(asked, environment) == chosen


def test_every_command_takes_lang():
    parser = build_parser()
    for command, rest in {"check": [], "batch": ["folder", "--out", "out"], "release": ["--out", "out"],
                          "list": [], "hint": ["attention"], "watch": [], "show": ["attention"]}.items():
        assert parser.parse_args([command, *rest, "--lang", "zh"]).lang == "zh", command


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["batch", "--help"], ["hint"],
                                  ["check", "--device", "gpu"], ["list", "--jobs", "3"]])
def test_help_and_usage_errors_read_in_chinese_with_argparse_own_words(argv, capsys, monkeypatch):
    """`--help` and argparse's own errors ("the following arguments are required") in the reader's language: the
    kit's help texts through its catalog, argparse's words through its gettext domain
    (grader/locale/zh/LC_MESSAGES/argparse.po)."""
    monkeypatch.setenv("GRADER_LANG", "zh")
    monkeypatch.setenv("COLUMNS", "60")
    with pytest.raises(SystemExit):
        main(argv)
    shown = capsys.readouterr()
    text = shown.out + shown.err
    from rich.cells import cell_len

    assert all(cell_len(line) <= 60 for line in shown.out.splitlines()), shown.out  # two cells a Chinese character
    assert "用法" in text or "错误：" in text, text
    assert not re.search(r"[\u4e00-\u9fff]:$", text, re.M), "a Chinese heading ends with a full-width colon"
    english = re.findall(r"\b(?:usage|options|positional|required|invalid|unrecognized|grade|write|error)\b", text)
    assert not english, (english, text)
    with pytest.raises(SystemExit):
        main([*argv, "--lang", "en"])
    assert re.search(r"usage: |error: ", "".join(capsys.readouterr())), "English back with --lang en"


def test_argparse_catalog_has_argparses_words_with_their_placeholders():
    import argparse
    import inspect

    with (REPO / "grader/locale/zh/LC_MESSAGES/argparse.po").open("rb") as handle:
        translated = {m.id if isinstance(m.id, str) else m.id[0]: m.string for m in read_po(handle, locale="zh")
                      if m.id}
    source = inspect.getsource(argparse)
    for message, text in translated.items():
        assert repr(message)[1:-1] in source or message in source, f"not one of argparse's messages: {message!r}"
        shown = text if isinstance(text, str) else text[0]
        assert set(re.findall(r"%\(\w+\)[sr]|%[sr]", message)) == set(re.findall(r"%\(\w+\)[sr]|%[sr]", shown))
        shown.encode("gb2312")


def test_the_score_table_reads_in_chinese_and_in_english(tmp_path):
    tests = (Result_("hidden/test_attention.py::test_a", Outcome.FAILED, 0.0, 5.0, "wrong"),
             Result_("hidden/test_attention.py::test_b", Outcome.FAILED, 0.0, 5.0, "wrong"))
    report = GradeReport("exercises", "all", "cpu", 1.0, "2.13.0", (
        ExerciseResult("attention", 0.0, 10.0, tests, files=("notebooks/01-attention.ipynb",)),
        ExerciseResult("masking", 0.0, 10.0, tests, ("attention",))), sandbox="bubblewrap")
    shown = {}
    try:
        for language in ("zh", "en"):
            lang.use(language)
            console = Console(record=True, width=120, color_system=None)
            render(report, console)
            shown[language] = console.export_text()
    finally:
        lang.use("en")
    assert "练习" in shown["zh"] and "受阻于 attention" in shown["zh"] and "评分用时 1.0 秒" in shown["zh"]
    assert "另有 1 个测试以同样方式失败" in shown["zh"]
    assert "Exercise" in shown["en"] and "blocked by attention" in shown["en"] and "练习" not in shown["en"]
    assert "评分所用文件" in shown["zh"] and "Graded from" in shown["en"]  # the files each exercise was graded from
    assert all("notebooks/01-attention.ipynb" in text for text in shown.values()), shown


def test_a_chinese_locale_gives_a_chinese_check_and_lang_en_gives_english_back(grader_env, tmp_path):
    """As a student's terminal sets it: LANG=zh_CN.UTF-8, nothing else, a check reads in Chinese; then --lang en on
    the same terminal gives English back. GRADER_STATE_DIR keeps the check's progress, which `list` reads."""
    env = {**grader_env, "LANG": "zh_CN.UTF-8"}
    for name in ("GRADER_LANG", "LC_ALL", "LC_MESSAGES"):
        env.pop(name, None)
    command = [sys.executable, "-m", "grader", "check", "attention", "--suite", "public", "--submission",
               str(REPO / "exercises")]
    chinese = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert chinese.returncode == 0, chinese.stderr
    assert "尚未开始" in chinese.stdout and "评分用时" in chinese.stdout, chinese.stdout
    # --lang en on the same terminal: `grader list`, which grades nothing, shows the same statuses.
    english = subprocess.run([sys.executable, "-m", "grader", "list", "--submission", str(REPO / "exercises"),
                              "--lang", "en"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "not started" in english.stdout and "尚未开始" not in english.stdout, english.stdout
    assert os.environ.get("GRADER_LANG") in (None, "en")  # nothing of it leaked into this process


def test_grader_hint_and_list_read_in_chinese_with_lang_zh_and_in_english_with_lang_en(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GRADER_STATE_DIR", str(tmp_path / "state"))  # the hints seen are this test's own
    monkeypatch.setenv("GRADER_LANG", "en")  # lang.use sets it; put back as it was afterwards

    def run(*argv: str) -> tuple[int | str | None, str, str]:
        try:
            exit_code = main(list(argv))
        except SystemExit as exit_:
            exit_code = exit_.code
        out, err = capsys.readouterr()
        return exit_code, "".join(out.replace("│", "").split()), err  # the text without the panel's frame and wrapping

    count = len(HINTS["attention"])
    try:
        zh_code, zh, _ = run("hint", "attention", "--level", "1", "--lang", "zh")
        last_code, last, _ = run("hint", "attention", "--level", str(count), "--lang", "zh")
        unknown_code, _, unknown = run("hint", "no_such_exercise", "--lang", "zh")
        list_code, listed, _ = run("list", "--lang", "zh")
        en_code, en, _ = run("hint", "attention", "--level", "1", "--lang", "en")
    finally:
        lang.use("en")
    assert zh_code == 0 and "注意力本质上是一种加权平均" in zh and f"提示1/{count}" in zh, zh
    assert "Attention" not in zh and "weighted" not in zh, zh
    assert last_code == 0 and "scores=query@key.transpose(-2,-1)/math.sqrt(d_k)" in last, last  # code as it is
    assert "这是attention的最后一条提示" in last, last
    assert unknown_code == 2 and "没有练习 'no_such_exercise'" in unknown, unknown
    assert list_code == 0 and "课程练习" in listed and "文件" in listed and "进度" in listed, listed
    assert en_code == 0 and "Attentionisa" in en and "weightedaverage" in en and f"hint1of{count}" in en, en
    assert not re.search(r"[\u4e00-\u9fff]", en), en


# --- the graded tests' feedback (grader/judge): built through `tr`, Chinese under zh, English as it was under en ---

JUDGE_MESSAGES = (
    "{name} differs from the expected value at index {index}: got {got}, expected {expected} (error {error}, "
    "tolerance {tolerance}); {count} of {total} values are off.",
    "{name} has shape {shape}, expected {expected}.",
    "{name} has 1 NaN value, at index {index}; expected {expected}.",
    "{name} should be a torch.Tensor, got {kind}",
    "{what} differs from the contract's: {found}.",
    "{what} dropped {dropped} of {seen} {site} ({rate}), where dropout with p = {p} drops {about}.",
    "{reason}: this test was not run",
)


def test_the_extractor_finds_the_judges_messages():
    used = used_messages()
    unseen = [message for message in JUDGE_MESSAGES if message not in used]
    assert not unseen, unseen
    assert sum(where.startswith("grader/judge/") for where in used.values()) >= 50


def _judged(check) -> str:
    with pytest.raises(AssertionError) as failure:
        check()
    return str(failure.value)


def _feedback_in(language: str) -> dict[str, str]:
    """What a few representative helpers of grader/judge say, in `language`."""
    import torch

    from grader.judge.checks import assert_close
    from grader.judge.expect import expect_tensor, expect_tuple
    from grader.judge.rates import expect_rate
    from grader.judge.structure import expect_structure
    from grader.judge.tracers import Dropping, Trace

    class Wanted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.key = torch.nn.Linear(4, 2, bias=False)

    class Given(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.key = torch.nn.Linear(4, 3)

    lang.use(language)
    return {
        "close": _judged(lambda: assert_close(torch.tensor([0.5, 0.25]), torch.tensor([0.5, 0.75]), atol=1e-3,
                                              name="weights", hint="rows sum to 1.")),
        "shape": _judged(lambda: assert_close(torch.zeros(2, 3), torch.zeros(3, 2), atol=1e-3, name="out")),
        "nan": _judged(lambda: assert_close(torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]), atol=1e-3,
                                            name="p_attn")),
        "tensor": _judged(lambda: expect_tensor((1, 2), name="attention()")),
        "tuple": _judged(lambda: expect_tuple(torch.zeros(2), 2, name="attention()")),
        "structure": _judged(lambda: expect_structure(Given(), Wanted(), what="HeadAttention", hint="bias=False.")),
        "rate": _judged(lambda: expect_rate(Trace("FeedForward", (Dropping("hidden activations", 0, 400),), 1.0, 1),
                                            0.1, what="FeedForward in training mode", hint="")),
    }


def test_the_judges_feedback_reads_in_chinese_and_exactly_as_before_in_english():
    try:
        zh, en = _feedback_in("zh"), _feedback_in("en")
    finally:
        lang.use("en")
    assert en == {
        "close": "weights differs from the expected value at index (1,): got 0.25, expected 0.75 (error 0.5, "
                 "tolerance 0.001); 1 of 2 values are off. Hint: rows sum to 1.",
        "shape": "out has shape (2, 3), expected (3, 2).",
        "nan": "p_attn has 1 NaN value, at index (0,); expected 0. Hint: a softmax gives NaN where every "
               "value it normalises is -inf (is it over the keys, dim=-1, and can a whole row be masked?), and exp() "
               "overflows to inf then NaN.",
        "tensor": "attention() should be a torch.Tensor, got a tuple of 2 values",
        "tuple": "attention() should return a tuple of 2 values, got a tensor of shape (2,)",
        "structure": "HeadAttention differs from the contract's: unexpected parameter(s) ['key.bias'], parameter "
                     "shapes differ: key.weight [3, 4] (expected [2, 4]). Hint: bias=False.",
        "rate": "FeedForward in training mode dropped 0 of 400 hidden activations (0%), where dropout with p = 0.1 "
                "drops about 40 (10%).",
    }
    assert zh["close"] == ("weights 在索引 (1,) 处与期望值不符：得到 0.25，应为 0.75（误差 0.5，容差 0.001）；"
                           "2 个值中有 1 个超出容差。 提示：rows sum to 1."), zh["close"]
    assert zh["shape"] == "out 的形状是 (2, 3)，应为 (3, 2)。", zh["shape"]
    assert zh["nan"].startswith("p_attn 中有 1 个 NaN 值，位于索引 (0,)；此处应为 0。 提示：softmax 所归一化"), \
        zh["nan"]
    assert zh["tensor"] == "attention() 应为 torch.Tensor，实际得到的是一个包含 2 个值的 tuple", zh["tensor"]
    assert zh["tuple"] == "attention() 应返回包含 2 个值的元组，实际得到的是一个形状为 (2,) 的张量", zh["tuple"]
    assert zh["structure"].startswith("HeadAttention 与约定不符：多出了约定之外的参数 ['key.bias'], 参数形状不符："
                                      "key.weight [3, 4]（应为 [2, 4]）。"), zh["structure"]
    assert zh["rate"] == ("FeedForward in training mode 在 400 个隐藏层激活值中丢弃了 0 个（0%），"
                          "而 p = 0.1 的 dropout 应丢弃约 40 个（10%）。"), zh["rate"]
    for text in zh.values():
        text.encode("gb2312")


def test_a_nan_is_a_measured_hint_in_either_language():
    """The plugin keeps the NaN hint (`hint_measured`) by finding it in the message, English or Chinese."""
    from grader.judge.checks import NAN_HINT

    try:
        lang.use("zh")
        chinese = lang.tr(NAN_HINT)
    finally:
        lang.use("en")
    assert chinese != NAN_HINT and "dim=-1" in chinese and "-inf" in chinese


def test_a_batch_slot_grades_in_the_language_the_batch_was_given(monkeypatch):
    """`grader batch --lang zh` sets GRADER_LANG, which its slots inherit; a slot applies it before anything else."""
    import types

    from grader.batch import slot

    class Started(Exception):
        pass

    def stop(*_: object) -> None:
        raise Started

    monkeypatch.setenv("GRADER_LANG", "zh")
    monkeypatch.setattr(slot, "processes", types.SimpleNamespace(die_with_parent=lambda _signal: None))
    monkeypatch.setattr(slot, "signal", types.SimpleNamespace(SIGTERM=15, default_int_handler=None, signal=stop))
    try:
        with pytest.raises(Started):
            slot.main()
        assert lang.current() == "zh"
    finally:
        lang.use("en")


# --- a pseudo-language: every line a student reads comes from a catalog -------------------------------------------

BRACKETED = re.compile(r"⟦[^⟦⟧]*⟧")
THEIRS = ("⟦Your code printed (last lines):⟧", "⟦Last lines on stderr:⟧")  # what follows is the submission's own


TEST_NAME = re.compile(r"\btest_\w+(\[[^\]]*\])?")  # a test's name and its case: names, never translated


def untranslated_lines(text: str) -> list[str]:
    """The lines of `text` holding English prose outside every ⟦translated⟧ span (grader.lang's pseudo-language),
    leaving out what the submission itself printed, and test names."""
    found = []
    for marker in THEIRS:
        text = text.split(marker, 1)[0]
    for line in text.splitlines():
        outside = TEST_NAME.sub(" ", line)
        while BRACKETED.search(outside):
            outside = BRACKETED.sub(" ", outside)  # innermost first: a field's translated value sits inside a message
        if extract.needs_translation(outside):
            found.append(line)
    return found


def test_the_pseudo_language_check_finds_english_outside_the_brackets():
    assert untranslated_lines("⟦blocked by ⟦a and b⟧: fix it⟧\nattention.py differs here") == [
        "attention.py differs here"]
    printed = "⟦x⟧ test_returns_output (attention)\n⟦Your code printed (last lines):⟧\nhello world"
    assert untranslated_lines(printed) == []


@pytest.fixture(scope="module")
def pseudo_reports(tmp_path_factory) -> list[dict]:
    """Grades, in the pseudo-language, submissions whose failures say most of what the kit can say: the stubs (not
    implemented, blocked, start here), and a folder with a known mistake in several exercises, a missing file, a
    NameError and a print. One warm slot; the capstone left out (--quick), which says nothing else."""
    from conftest import WarmGrader

    from grader.judge import variants

    base = tmp_path_factory.mktemp("pseudo")
    base.chmod(0o755)
    stubs = base / "stubs"
    shutil.copytree(REPO / "exercises", stubs)
    mixed = base / "mixed"
    shutil.copytree(REPO / "solutions", mixed, ignore=shutil.ignore_patterns("mistakes", "__pycache__"))
    for exercise, name in (("attention", "mask_after_softmax"), ("sublayers", "feed_forward_fixed_dropout"),
                           ("multi_head_attention", "no_scaling")):
        variant = next((v for v in variants.mistakes(exercise) if v.name == name), variants.mistakes(exercise)[0])
        variants.write(variant, mixed)
    (mixed / "masking.py").unlink()
    source = (mixed / "positional_encoding.py").read_text()
    (mixed / "positional_encoding.py").write_text(source.replace(
        "import torch\n", "import torch\nprint('loading the positional encoding')\nundefined_name\n", 1))
    grader = WarmGrader(base / "work", slots=1, environment={"GRADER_LANG": lang.PSEUDO})
    try:
        runs = grader.grade([(stubs, ()), (mixed, ())], quick=True)
    finally:
        grader.close()
    assert all(run.report for run in runs), [run.stderr for run in runs]
    return [run.report for run in runs]


def test_in_the_pseudo_language_no_feedback_line_is_left_in_english(pseudo_reports):
    left = [f"{test['name']}: {line}" for report in pseudo_reports for exercise in report["exercises"]
            for test in exercise["tests"] for line in untranslated_lines(test["message"])]
    left += [f"{exercise['id']} (absent): {exercise['absent']}" for report in pseudo_reports
             for exercise in report["exercises"] if untranslated_lines(exercise.get("absent", ""))]
    assert sum(bool(test["message"]) for report in pseudo_reports for exercise in report["exercises"]
               for test in exercise["tests"]) >= 100  # the failures were there to read
    assert not left, "untranslated:\n" + "\n".join(dict.fromkeys(left))


def test_in_the_pseudo_language_the_score_table_and_what_follows_are_translated(pseudo_reports):
    lang.use(lang.PSEUDO)
    try:
        shown = []
        for report in pseudo_reports:
            console = Console(record=True, width=400, color_system=None)
            render(GradeReport.from_json(report), console, verbose=True)
            shown.append(console.export_text())
    finally:
        lang.use("en")
    left = [line for text in shown for line in untranslated_lines(text)]
    assert not left, "untranslated:\n" + "\n".join(dict.fromkeys(left))


def test_chinese_words_filled_in_are_not_spaced_off_the_translations_own():
    """A translation spaces its placeholders off its Chinese for code names ("attention 和 masking"); where the value
    is Chinese words itself, the space goes ("隐藏测试和参考答案"), and the value itself is never changed."""
    from grader import lang

    lang.use("zh")
    try:
        words = lang.listed([lang.tr("the hidden tests"), lang.tr("the reference solutions")])
        names = lang.listed(["attention", "masking"])
        kept = lang.tr("{first} and {last}", first="你 好", last="x")
    finally:
        lang.use("en")
    assert words == "隐藏测试和参考答案", words
    assert names == "attention 和 masking", names
    assert kept == "你 好和 x", kept  # the value's own space stays; a Latin neighbour keeps its space
