"""The reader's language (issue 33): how it is chosen, and the Chinese catalog's completeness.

Every message the grader passes through `tr` is found by Babel's own extractor (as `pybabel extract` would);
each must have a Chinese translation with the same placeholders, every translation must be used, and all of
them must be writable on a GB2312 console (Chinese Windows), as the marks are.
"""

from __future__ import annotations

import os
import string
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from rich.console import Console

from grader import lang
from grader.cli.parse import build_parser
from grader.cli.render import render
from grader.grade.reports import GradeReport
from grader.grade.results import ExerciseResult
from grader.grade.results import TestOutcome as Outcome
from grader.grade.results import TestResult as Result_

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "grader" / "locale" / "zh" / "LC_MESSAGES" / "grader.po"


def used_messages() -> dict[str, str]:
    """Every message id passed to `tr` in the grader's code: {id: where}."""
    found = {}
    method_map = [("**.py", "python")]
    for filename, lineno, message, _comments, _context in extract_from_dir(
            REPO / "grader", method_map=method_map, keywords={"tr": None}):
        found.setdefault(message if isinstance(message, str) else message[0], f"grader/{filename}:{lineno}")
    return found


def catalog() -> dict[str, str]:
    with CATALOG.open("rb") as handle:
        return {m.id: m.string for m in read_po(handle, locale="zh") if m.id and not m.fuzzy}


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_every_message_has_a_chinese_translation_with_the_same_placeholders():
    used, translated = used_messages(), catalog()
    assert len(used) >= 20, used  # the extractor found the messages, not nothing
    missing = [f"{where}: {message!r}" for message, where in used.items() if not translated.get(message)]
    assert not missing, "untranslated (add them to grader.po):\n" + "\n".join(missing)
    wrong = [f"{message!r} -> {translated[message]!r}" for message in used
             if fields(message) != fields(translated[message])]
    assert not wrong, "placeholders differ between id and translation:\n" + "\n".join(wrong)


def test_every_translation_is_used_and_writable_on_a_chinese_windows_console():
    used, translated = used_messages(), catalog()
    assert not set(translated) - set(used), f"translations nothing uses: {sorted(set(translated) - set(used))}"
    for text in translated.values():
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


def test_the_score_table_reads_in_chinese_and_in_english(tmp_path):
    tests = (Result_("hidden/test_attention.py::test_a", Outcome.FAILED, 0.0, 5.0, "wrong"),
             Result_("hidden/test_attention.py::test_b", Outcome.FAILED, 0.0, 5.0, "wrong"))
    report = GradeReport("exercises", "all", "cpu", 1.0, "2.13.0", (
        ExerciseResult("attention", 0.0, 10.0, tests),
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


def test_a_chinese_locale_gives_a_chinese_check_and_lang_en_gives_english_back(grader_env, tmp_path):
    """As a student's terminal sets it: LANG=zh_CN.UTF-8, nothing else; then --lang en on the same terminal."""
    env = {**grader_env, "LANG": "zh_CN.UTF-8"}
    for name in ("GRADER_LANG", "LC_ALL", "LC_MESSAGES"):
        env.pop(name, None)
    command = [sys.executable, "-m", "grader", "check", "attention", "--suite", "public", "--submission",
               str(REPO / "exercises")]
    chinese = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert chinese.returncode == 0, chinese.stderr
    assert "尚未开始" in chinese.stdout and "评分用时" in chinese.stdout, chinese.stdout
    english = subprocess.run([*command, "--lang", "en"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert "not started" in english.stdout and "尚未开始" not in english.stdout, english.stdout
    assert os.environ.get("GRADER_LANG") in (None, "en")  # nothing of it leaked into this process
