"""What a submission writes never reaches a screen or a spreadsheet raw, and one bad input is one refusal.

A terminal is read as a student sees it: the grader runs in a pseudo-terminal, as rich's colours and
progress bar need, and its output is played into pyte's terminal emulator. A batch is read as an
instructor's spreadsheet reads grades.csv.
"""

from __future__ import annotations

import csv
import fcntl
import itertools
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.batch.schedule import discover
from grader.text import clean, id_of, spreadsheet_cell

REPO = Path(__file__).resolve().parents[2]
FORGERY = REPO / "tests" / "kit" / "submissions" / "forgery"
ROWS, COLUMNS = 300, 160
# What a terminal acts on: C0 controls but the newline, DEL, C1 controls, bidirectional overrides, surrogates.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def in_a_terminal(args: list[str], cwd: Path, timeout: float = 180.0, columns: int = COLUMNS, **env: str):
    """`python -m grader ARGS` in a pseudo-terminal (TERM=xterm, colours on); returns (exit code, pyte screen)."""
    pyte = pytest.importorskip("pyte")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES")}
    environment.update(TERM="xterm", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **env)
    process = subprocess.Popen([sys.executable, "-m", "grader", *args], cwd=cwd, env=environment,
                               stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
        os.close(master)
    screen = pyte.Screen(columns, ROWS)
    pyte.ByteStream(screen).feed(bytes(output))
    return code, screen


def test_an_error_message_cannot_draw_a_fake_score_table(tmp_path):
    reports = {kind: tmp_path / f"{kind}.json" for kind in ("json", "gradescope", "exercism")}
    code, screen = in_a_terminal(
        ["check", "attention", "--suite", "public", "--submission", str(FORGERY / "terminal_fake_table"),
         *(option for kind, path in reports.items() for option in (f"--{kind}", str(path)))], cwd=tmp_path)
    lines = [line.rstrip() for line in screen.display]
    shown = "\n".join(line for line in lines if line)
    assert code == 0, shown
    totals = [line for line in lines if re.match(r"\W*Total\W", line) and "\\x1b[" not in line]
    assert len(totals) == 1 and re.search(r"\b0/10\b.*\b0%", totals[0]), f"the real total is not shown:\n{shown}"
    # The fake's rows may be shown, quoted: each then carries its escape sequence in plain sight.
    drawn = [line for line in lines if ("12/12" in line or "100/100" in line) and "\\x1b[" not in line]
    assert not drawn, "the fake table was drawn on the screen:\n" + "\n".join(drawn)
    assert "FORGED" not in screen.title, f"the submission set the terminal's title to {screen.title!r}"
    for kind, path in reports.items():
        text = path.read_text(encoding="utf-8")
        assert not UNSAFE.search(json.dumps(json.loads(text), ensure_ascii=False)), f"--{kind} holds control codes"
    report = json.loads(reports["json"].read_text())
    assert report["score"] == 0
    assert "\\x1b[2J" in report["exercises"][0]["tests"][0]["message"], "the message should be shown, quoted"


def test_a_narrow_terminal_wraps_feedback_between_words(short_tmp_path):
    """At 80 columns every long message wraps at a space and keeps its indent, and the title keeps the path whole."""
    from grader.judge import variants

    tmp_path = short_tmp_path  # pytest's own may be too long to fit (pytest-of-root/pytest-N/popen-gw0/...)
    # A path that fits the terminal, but not with the rest of the title after it.
    room = 76 - len(str(tmp_path / "exercises"))
    submission = tmp_path / "lms-export-of-week-3-submissions"[: max(1, room)] / "exercises"
    submission.mkdir(parents=True)
    for name in ("attention.py", "masking.py"):
        shutil.copyfile(REPO / "solutions" / name, submission / name)
    variants.write(next(m for m in variants.mistakes("attention") if m.name == "no_scaling"), submission)
    code, screen = in_a_terminal(["check", "attention", "--submission", str(submission)], cwd=tmp_path, columns=80)
    lines = [line.rstrip() for line in screen.display]
    shown = "\n".join(line for line in lines if line)
    assert code == 0, shown
    assert any(str(submission) in line for line in lines), f"the path was broken:\n{shown}"
    messages = [line for line in lines if line.startswith("    ")]
    assert len(messages) > len([line for line in lines if line.startswith("✘")]), f"nothing wrapped:\n{shown}"
    for line, after in itertools.pairwise(lines):
        broken = len(line) == 80 and line[-1].isalnum() and after[:1].isalnum()
        assert not broken, f"a word broken across lines:\n{line}\n{after}"


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kit-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_show_quotes_the_error_message(grader_cli):
    run = grader_cli.run("show", "attention", "--submission", str(FORGERY / "terminal_fake_table"))
    assert run.returncode == 1, run.describe()  # no weights to draw
    assert not UNSAFE.search(run.stdout + run.stderr), run.describe()
    assert "\\x1b[2J" in run.stdout, run.describe()


def test_a_lone_surrogate_in_a_message_is_shown_not_fatal(grader_cli, tmp_path):
    submission = FORGERY / "terminal_lone_surrogate"
    run = grader_cli.check(submission, tmp_path / "report.json", "attention", "--suite", "public")
    assert run.returncode == 0, run.describe()
    assert re.search(r"Total\W+0/10\W+0%", run.stdout), run.describe()
    raw = (tmp_path / "report.json").read_bytes()
    text = json.dumps(json.loads(raw), ensure_ascii=False)
    text.encode("utf-8")  # strict: a lone surrogate would raise here
    assert "\ufffd surrogate" in text


@pytest.mark.parametrize("settings", [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C"}])
def test_output_survives_an_encoding_that_cannot_write_it(grader_cli, grader_env, settings):
    submission = FORGERY / "terminal_lone_surrogate"
    run = grader_cli.run("check", "attention", "--suite", "public", "--submission", str(submission),
                         env={**grader_env, **settings})
    assert run.returncode == 0, run.describe()
    assert "Total" in run.stdout and "internal error" not in run.stderr, run.describe()


# Names a student can give a folder on Linux; the first four are formulas in a spreadsheet.
HOSTILE_NAMES = ('=HYPERLINK("http:x")', "+1+1", "@SUM(A1)", "-2", "summary", "grades", "Summary", "new\nline",
                 "esc\x1b[2Jape", "\rcarriage", "tab\tbed", "a:b", "a?b", "a_b", "alice")


def bad_zips(folder: Path) -> dict[str, str]:
    """Zips that cannot be read, by the zip module's own means; {file name: a word of the reason}."""
    source = (REPO / "exercises" / "attention.py").read_bytes()

    def write(name: str, compression: int = zipfile.ZIP_STORED) -> bytearray:
        with zipfile.ZipFile(folder / name, "w", compression=compression) as archive:
            archive.writestr("attention.py", source)
        return bytearray((folder / name).read_bytes())

    data = write("badcrc.zip")
    data[data.index(b"def ")] ^= 0x20
    (folder / "badcrc.zip").write_bytes(data)
    data = write("encrypted.zip")
    data[data.index(b"PK\x03\x04") + 6] |= 0x1  # the encryption flag, in the local and the central header
    data[data.index(b"PK\x01\x02") + 8] |= 0x1
    (folder / "encrypted.zip").write_bytes(data)
    data = write("unsupported.zip")
    for header, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.index(header) + offset
        data[at:at + 2] = struct.pack("<H", 99)  # a compression method no one implements
    (folder / "unsupported.zip").write_bytes(data)
    data = write("truncated.zip", zipfile.ZIP_DEFLATED)
    (folder / "truncated.zip").write_bytes(data[: len(data) // 2])
    return {"badcrc.zip": "CRC", "encrypted.zip": "encrypted", "unsupported.zip": "compression",
            "truncated.zip": "not a readable zip"}


@pytest.fixture(scope="module")
def hostile_batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    for name in HOSTILE_NAMES:
        shutil.copytree(REPO / "exercises", folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "solutions", folder / "alice", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    zips = bad_zips(folder)
    out = tmp_path_factory.mktemp("grades")
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--suite", "public",
               "--jobs", "2"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    run = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, errors="replace",
                         timeout=900)
    return folder, out, zips, run, command, environment


def test_grades_csv_cells_are_never_formulas_and_ids_are_safe(hostile_batch):
    folder, out, zips, run, _, _ = hostile_batch
    assert run.returncode == 0, run.stderr
    assert not UNSAFE.search(run.stdout + run.stderr), "the batch's output holds control codes"
    with (out / "grades.csv").open(newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    header, rows = table[0], table[1:]
    assert header[:3] == ["id", "status", "sandbox"] and header[-2:] == ["total", "mistakes"]
    assert len(rows) == len(HOSTILE_NAMES) + len(zips)
    for row in rows:
        for cell in [*row[:3], row[-1]]:
            assert not cell.startswith(FORMULA_STARTS), f"a text cell a spreadsheet runs as a formula: {cell!r}"
        for cell in row[3:-1]:  # scores stay numbers; a refused or grader-error row has none
            assert (cell == "") == (row[1] in ("refused", "grader-error")), row
            if cell:
                float(cell)
    ids = [row[0] for row in rows]
    assert len({i.casefold() for i in ids}) == len(ids), f"ids collide: {ids}"
    for submission_id in ids:
        assert re.fullmatch(r"\w[\w.-]*", submission_id), f"{submission_id!r} is not safe as a file name"
        assert submission_id.casefold() not in ("grades", "summary"), submission_id
        assert (out / f"{submission_id}.json").is_file(), f"no report for {submission_id!r}"
    assert "alice" in ids and "a_b" in ids, "an id that was already safe should be kept as it is"


def test_every_report_keeps_the_original_name(hostile_batch):
    folder, out, zips, _, _, _ = hostile_batch
    paths = [path for path in out.glob("*.json") if path.name != "summary.json"]
    reports = [json.loads(path.read_text()) for path in paths]
    assert [report["id"] for report in reports] == [path.stem for path in paths]
    names = {report["submission_name"] for report in reports}
    plain = [name for name in HOSTILE_NAMES if not re.search("[\x00-\x1f]", name)]
    assert set(plain) | set(zips) <= names, sorted(names)
    for name in ("new\\nline", "esc\\x1b[2Jape", "\\rcarriage", "tab\\tbed"):
        assert name in names, f"{name!r} should be kept, its control characters shown as escapes: {sorted(names)}"
    summary = json.loads((out / "summary.json").read_text())
    assert "submissions" in summary and summary["submissions"] == len(reports)


def test_each_bad_zip_is_one_named_refusal(hostile_batch):
    _, out, zips, _, _, _ = hostile_batch
    rows = {row["id"]: row for row in csv.DictReader((out / "grades.csv").open(newline=""))}
    for name, reason in zips.items():
        submission_id = name.removesuffix(".zip")
        assert rows[submission_id]["status"] == "refused", rows[submission_id]
        report = json.loads((out / f"{submission_id}.json").read_text())
        assert report["score"] == 0 and report["submission_name"] == name
        assert any(reason in warning and name in warning for warning in report["warnings"]), report["warnings"]
    assert float(rows["alice"]["total"]) == 100, "the batch should grade the others in full"


def test_a_rerun_regrades_nothing(hostile_batch):
    _, out, _, _, command, environment = hostile_batch
    reports = {path.name: path.stat().st_mtime_ns for path in out.glob("*.json") if path.name != "summary.json"}
    summary = json.loads((out / "summary.json").read_text())
    run = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rewritten = [name for name, written in reports.items() if (out / name).stat().st_mtime_ns != written]
    assert not rewritten, f"the rerun graded {rewritten} again"
    assert json.loads((out / "summary.json").read_text()) == summary


def test_check_refuses_a_bad_zip_in_one_line(grader_cli, tmp_path):
    for name in bad_zips(tmp_path):
        run = grader_cli.run("check", "attention", "--suite", "public", "--submission", str(tmp_path / name))
        assert run.returncode == 2, run.describe()
        assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.describe()
        assert name in run.stderr, run.describe()


def test_clean_shows_every_control_character_and_keeps_newlines():
    assert clean("a\x1b[2Jb\r\nc\x9b\x00\u202e") == "a\\x1b[2Jb\\r\nc\\x9b\\x00\\u202e"
    assert clean("one\ntwo", newlines=False) == "one\\ntwo"
    assert clean("lone \ud800") == "lone \ufffd"
    assert clean("plain · ünïcode ✔") == "plain · ünïcode ✔"


def test_ids_and_cells():
    assert id_of("alice") == "alice" and id_of("a b/c") == "a_b_c" and id_of("-2") == "_2"
    assert id_of(".hidden") == "_hidden" and len(id_of("é" * 200).encode()) <= 150
    assert spreadsheet_cell("=1+1") == "'=1+1" and spreadsheet_cell("graded") == "graded"
    # Ids read as what they are, in one order: no letter that shows as nothing, no right-to-left run that can
    # display like another name (`דנה_2` and `2_דנה` look the same in a browser); the reports keep the names.
    assert id_of("\u115f") == "_" and id_of("a\u3164") == "a_" and id_of("名字") == "名字"
    assert id_of("דנה_2") != "דנה_2" and id_of("2_דנה") != "2_דנה"


def test_right_to_left_names_get_ids_that_cannot_be_mistaken_for_each_other(tmp_path):
    for name in ("דנה_2", "2_דנה", "alice"):
        (tmp_path / name).mkdir()
    ids = {entry.path.name: entry.id for entry in discover(tmp_path)}
    assert ids["alice"] == "alice" and len(set(ids.values())) == 3, ids
    assert all(not any("\u0590" <= ch <= "\u05ff" for ch in i) for i in ids.values()), ids
