"""`grader batch`: every submission gets a report, a rerun skips what is done, and a batch killed
halfway finishes the rest with the same results and summary as an uninterrupted run. The class's
statistics are over the graded submissions, and a batch the grader failed on exits 3."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from grader.batch.schedule import discover
from grader.host.bubblewrap import bwrap_problem
from grader.text import skeleton

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
# Passes the grader's bubblewrap probe and fails every real sandbox (as in test_sandbox_failures): the grader,
# not the submission, fails.
LATE_FAILING_BWRAP = """#!/bin/sh
case "$*" in *"--ro-bind / /host"*) exec "{bwrap}" "$@";; esac
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
"""


@pytest.fixture(scope="module")
def class_folder(batch_class) -> Path:
    return batch_class


def batch(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--suite", "public",
               "--jobs", "2", *extra]
    return subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def scores(out: Path) -> dict[str, list[tuple[str, str, float]]]:
    return {
        path.stem: [(t["name"], t["outcome"], t["points"]) for e in json.loads(path.read_text())["exercises"]
                    for t in e["tests"]]
        for path in sorted(out.glob("*.json")) if path.name != "summary.json"
    }


@pytest.fixture(scope="module")
def first_run(batch_reference):
    return batch_reference


def test_every_submission_gets_a_report_and_a_csv_row(first_run):
    run, out = first_run
    assert run.returncode == 0, run.stderr
    table = list(csv.reader((out / "grades.csv").open()))
    assert table[0][:3] == ["id", "status", "sandbox"] and table[0][-2:] == ["total", "mistakes"], table[0]
    rows = {row["id"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert set(rows) == {"alice", "bob", "carol", "mallory"}, rows.keys()
    assert rows["alice"]["status"] == "graded" and rows["mallory"]["status"] == "refused", rows
    tier = json.loads((out / "alice.json").read_text())["sandbox"]
    assert rows["alice"]["sandbox"] == tier and tier in ("bubblewrap", "none"), rows["alice"]
    assert float(rows["alice"]["total"]) == 100 and float(rows["bob"]["total"]) == 0
    # A refused submission is no 0 a gradebook could take for a mark: its point cells are empty, its status says why.
    assert rows["mallory"]["total"] == "" and all(rows["mallory"][x] == "" for x in ("attention", "masking")), rows
    assert float(rows["carol"]["attention"]) == 10 and float(rows["carol"]["masking"]) == 0
    mallory = json.loads((out / "mallory.json").read_text())
    assert mallory["status"] == "refused" and "unsafe path" in mallory["warnings"][0]
    alice = json.loads((out / "alice.json").read_text())
    assert (mallory["device"], mallory["torch"]) == (alice["device"], alice["torch"]), mallory
    summary = json.loads((out / "summary.json").read_text())
    assert summary["submissions"] == 4, summary
    assert summary["statuses"] == {"graded": 3, "refused": 1, "limit": 0, "grader-error": 0}, summary["statuses"]
    assert sum(summary["sandboxes"].values()) == 4, summary["sandboxes"]


def test_the_class_statistics_are_over_the_graded_submissions_only(first_run):
    run, out = first_run
    summary = json.loads((out / "summary.json").read_text())
    # alice 100, bob 0, carol 10: mallory's refused zip is no 0 of the class's.
    assert summary["scored"] == 3 and summary["mean_score"] == round(110 / 3, 4), summary
    assert summary["exercises"]["attention"] == round(20 / 3, 4), summary["exercises"]
    assert summary["exercises"]["masking"] == round(10 / 3, 4), summary["exercises"]
    assert [row["count"] for row in summary["histogram"]] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1], summary["histogram"]
    # No test most students fail: bob's are unstarted stubs and carol's other files are not in her submission, so
    # no failure there judged a student's own code (test_class_report checks the ranking on a class that fails).
    assert summary["hardest_tests"] == [], summary["hardest_tests"]
    mallory = json.loads((out / "mallory.json").read_text())
    assert summary["limits"] == [{"id": "mallory", "limits": ["refused"], "reason": mallory["warnings"][0],
                                  "status": "refused"}]
    assert "4 submissions: 3 graded, 1 refused, 0 limit, 0 grader-error" in run.stdout, run.stdout
    assert "Mean 36.67/100 over the 3 graded (1 refused, limit or grader-error not counted)" in run.stdout, run.stdout
    assert "mallory: refused" in run.stdout, run.stdout


def test_a_rerun_skips_what_is_done_and_sums_up_the_class_as_the_first_run_did(first_run, class_folder):
    first, out = first_run
    before = scores(out)
    summary = json.loads((out / "summary.json").read_text())
    started = time.monotonic()
    run = batch(class_folder, out)
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started < 30, "nothing should have been regraded"
    statuses = {p.stem: json.loads(p.read_text())["status"] for p in out.glob("*.json") if p.stem != "summary"}
    assert set(statuses.values()) <= {"graded", "refused"}, statuses
    assert scores(out) == before
    # No field of summary.json is a timing: a rerun's is the first run's, whatever it skipped.
    assert json.loads((out / "summary.json").read_text()) == summary
    assert run.stdout == first.stdout


def test_a_batch_killed_halfway_finishes_with_the_same_results(first_run, class_folder, tmp_path):
    _, reference = first_run
    out = tmp_path / "grades"
    command = [sys.executable, "-m", "grader", "batch", str(class_folder), "--out", str(out), "--suite", "public",
               "--jobs", "1"]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(out.glob("*.json")) and time.monotonic() < deadline:  # wait for the first report
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert len([p for p in out.glob("*.json")]) < 4, "the batch finished before it could be killed"
    run = batch(class_folder, out)
    assert run.returncode == 0, run.stderr
    assert scores(out) == scores(reference)
    assert (out / "grades.csv").read_text() == (reference / "grades.csv").read_text()
    assert json.loads((out / "summary.json").read_text()) == json.loads((reference / "summary.json").read_text())
    assert not list(out.glob(".partial-*"))


@pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable here: {bwrap_problem()}")
def test_a_batch_the_grader_failed_on_exits_3_after_writing_every_report(tmp_path):
    folder = tmp_path / "class"
    for name, source in (("dan", REPO / "solutions"), ("eve", REPO / "exercises")):
        (folder / name).mkdir(parents=True)
        shutil.copyfile(source / "attention.py", folder / name / "attention.py")
    scripts = Path(tempfile.mkdtemp(prefix="kit-bwrap-"))  # bubblewrap runs it as uid 65534: not under tmp_path
    try:
        scripts.chmod(0o755)
        failing = scripts / "bwrap"
        failing.write_text(LATE_FAILING_BWRAP.format(bwrap=shutil.which("bwrap")))
        failing.chmod(0o755)
        out = tmp_path / "grades"
        command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--suite", "public",
                   "--jobs", "2"]
        run = subprocess.run(command, cwd=REPO, env={**ENV, "GRADER_BWRAP": str(failing)}, capture_output=True,
                             text=True, timeout=600)
    finally:
        shutil.rmtree(scripts, ignore_errors=True)
    assert run.returncode == 3, (run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "2 of 2 submissions ended grader-error" in lines[0] and "again" in lines[0], lines
    assert "Traceback" not in run.stderr
    for name in ("dan", "eve"):
        report = json.loads((out / f"{name}.json").read_text())
        assert report["status"] == "failed" and "sandbox" in report["warnings"][0], report["warnings"]
    rows = {row["id"]: row["status"] for row in csv.DictReader((out / "grades.csv").open())}
    assert rows == {"dan": "grader-error", "eve": "grader-error"}, rows
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statuses"] == {"graded": 0, "refused": 0, "limit": 0, "grader-error": 2}, summary["statuses"]
    assert summary["scored"] == 0 and summary["mean_score"] is None and summary["hardest_tests"] == [], summary
    assert "No submission was graded" in run.stdout and "Mean" not in run.stdout, run.stdout


def test_a_missing_folder_is_a_one_line_usage_error(tmp_path):
    run = batch(tmp_path / "nope", tmp_path / "out")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_a_submission_over_its_time_budget_is_stopped_and_the_next_one_is_graded(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copytree(REPO / "tests" / "kit" / "submissions" / "hostile" / "infinite_loop", folder / "looper")
    shutil.copytree(REPO / "solutions", folder / "zoe")
    out = tmp_path / "grades"
    started = time.monotonic()
    run = batch(folder, out, "--timeout", "6", "--jobs", "1")
    assert run.returncode == 0, run.stderr
    looper, zoe = (json.loads((out / f"{name}.json").read_text()) for name in ("looper", "zoe"))
    assert looper["status"] == "timeout" and "6 s budget" in looper["warnings"][0], looper["warnings"]
    rows = {row["id"]: row["status"] for row in csv.DictReader((out / "grades.csv").open())}
    assert rows == {"looper": "limit", "zoe": "graded"}, rows
    assert zoe["status"] == "graded" and zoe["score"] == zoe["max_score"] == 100
    assert time.monotonic() - started < 120
    summary = json.loads((out / "summary.json").read_text())
    assert {"id": "looper", "limits": ["timeout"], "reason": looper["warnings"][0],
            "status": "limit"} in summary["limits"]
    # The looper went over the budget: counted beside the class, never a 0 in its mean.
    assert summary["statuses"] == {"graded": 1, "refused": 0, "limit": 1, "grader-error": 0}, summary["statuses"]
    assert summary["scored"] == 1 and summary["mean_score"] == 100, summary
    assert summary["hardest_tests"] == [], summary["hardest_tests"]
    assert "Mean 100/100 over the 1 graded (1 refused, limit or grader-error not counted)" in run.stdout, run.stdout


def test_relative_paths_are_read_from_the_folder_the_instructor_is_in(tmp_path):
    (tmp_path / "class").mkdir()
    shutil.copytree(REPO / "solutions", tmp_path / "class" / "alice")
    command = [sys.executable, "-m", "grader", "batch", "class", "--out", "grades", "--suite", "public", "--jobs", "1"]
    env = {**ENV, "PYTHONPATH": str(REPO)}  # this kit, wherever it is installed from
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "grades" / "alice.json").read_text())
    assert report["status"] == "graded" and report["score"] == report["max_score"], report["warnings"]


SCRATCH = REPO / "tests" / "kit" / "submissions" / "scratch"
DOCKER_BWRAP = "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"


@pytest.mark.parametrize("tier", ["bubblewrap", "user"])
def test_a_submission_that_spoils_its_scratch_space_costs_the_next_one_nothing(tmp_path, tier):
    """One spoiler closes its scratch folder (chmod 0), another nests folders deeper than Python's recursion;
    the classmate graded after each in the same sandbox writes temporary files, and must keep full marks, in a
    batch that ends normally and leaves no stage behind."""
    if tier == "bubblewrap" and bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unusable here: {bwrap_problem()}")
    if tier == "user" and os.geteuid() != 0:
        pytest.skip("the user tier needs a root grader")
    folder, temporary = tmp_path / "class", Path(tempfile.mkdtemp(prefix="kit-scratch-"))
    temporary.chmod(0o755)
    order = (("a-closed", "closed_scratch"), ("b-tempfile", "tempfile_user"), ("c-deep", "deep_tree"),
             ("d-tempfile", "tempfile_user"))
    for name, source in order:
        shutil.copytree(SCRATCH / source, folder / name)
    env = {**ENV, "TMPDIR": str(temporary)}
    if tier == "user":
        (temporary / "bin").mkdir(mode=0o755)
        (temporary / "bin" / "bwrap").write_text(DOCKER_BWRAP)
        (temporary / "bin" / "bwrap").chmod(0o755)
        env["GRADER_BWRAP"] = str(temporary / "bin" / "bwrap")
    out = tmp_path / "grades"
    try:
        run = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--suite",
                              "public", "--jobs", "1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        # torch's compile cache is the trusted grader's own, made as it imports torch: not the submissions'
        left = sorted(p.name for p in temporary.iterdir() if p.name != "bin" and not p.name.startswith("torchinductor"))
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(temporary)], check=False)
    assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    rows = {row["id"]: (row["status"], row["sandbox"], row["attention"])
            for row in csv.DictReader((out / "grades.csv").open())}
    assert rows == {"a-closed": ("graded", tier, "0"), "b-tempfile": ("graded", tier, "10"),
                    "c-deep": ("graded", tier, "0"), "d-tempfile": ("graded", tier, "10")}, (rows, run.stderr[-3000:])
    assert not left, f"the batch left {left} in its TMPDIR"


def test_reports_written_inside_the_submissions_folder_are_no_submission(tmp_path):
    """`grader batch . --out grades`, run twice: the second run must not take grades/ for a student's folder."""
    (tmp_path / "class" / "alice").mkdir(parents=True)
    shutil.copyfile(REPO / "solutions" / "attention.py", tmp_path / "class" / "alice" / "attention.py")
    out = tmp_path / "class" / "grades"
    runs = [batch(tmp_path / "class", out) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr
    rows = [row["id"] for row in csv.DictReader((out / "grades.csv").open())]
    assert rows == ["alice"] and "1 submissions" in runs[-1].stdout, (rows, runs[-1].stdout)


# Three folders, one name to the eye: a Latin o, a Greek omicron, a Cyrillic o.
LOOK_ALIKES = ("bob", "b\u03bfb", "b\u043eb")


def test_names_that_look_alike_get_ids_a_person_can_tell_apart(tmp_path):
    names = (*LOOK_ALIKES, "alice", "\uff42\uff4f\uff42.zip")  # and a fullwidth bob, in a zip
    for folder, order in ((tmp_path / "one", names), (tmp_path / "two", names[::-1])):
        folder.mkdir()
        for name in order:
            if name.endswith(".zip"):
                zipfile.ZipFile(folder / name, "w").close()
            else:
                (folder / name).mkdir()
    entries = discover(tmp_path / "one")
    ids = {entry.path.name: entry.id for entry in entries}
    assert [e.id for e in discover(tmp_path / "two")] == [e.id for e in entries], "ids must be the same on every run"
    assert discover(tmp_path / "one") == entries
    assert ids["alice"] == "alice" and ids["bob"] == "bob", "a name nothing looks like should be its own id"
    assert len(set(ids.values())) == len(ids), ids
    read_as = {i.casefold().replace("\u03bf", "o").replace("\u043e", "o") for i in ids.values()}  # what one reads
    assert len(read_as) == len(ids) and len({skeleton(i) for i in ids.values()}) == len(ids), ids
    for name in LOOK_ALIKES[1:]:
        assert re.fullmatch(rf"{name}-[0-9a-f]{{8}}", ids[name]), f"{name!r} should be told apart by a hash: {ids}"
    assert re.fullmatch(r"bob-[0-9a-f]{8}", ids["\uff42\uff4f\uff42.zip"]), ids  # written plainly (NFKC), told apart


def test_each_look_alike_gets_its_own_row_and_keeps_its_name_in_its_report(tmp_path):
    for name in LOOK_ALIKES:
        (tmp_path / "class" / name).mkdir(parents=True)  # no exercise file: each is refused, quickly
    run = batch(tmp_path / "class", tmp_path / "out")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [row["id"] for row in csv.DictReader((tmp_path / "out" / "grades.csv").open(encoding="utf-8"))]
    assert sorted(rows) == sorted(entry.id for entry in discover(tmp_path / "class")) and len(set(rows)) == 3, rows
    names = {}
    for submission_id in rows:
        report = json.loads((tmp_path / "out" / f"{submission_id}.json").read_text(encoding="utf-8"))
        assert report["id"] == submission_id and report["status"] == "refused", report
        names[report["submission_name"]] = submission_id
    assert set(names) == set(LOOK_ALIKES), names


def _browser() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))),
                None)


@pytest.mark.skipif(_browser() is None, reason="no headless browser here (CI installs Debian's chromium)")
def test_the_class_report_renders_in_a_browser_with_its_charts_and_no_console_errors(first_run, tmp_path):
    """The page the batch wrote, opened as an instructor would (a file, offline) in headless chromium: the DOM has
    both charts, who needs help first and every student's row from the lowest total up, a screenshot shows the bars
    drawn, and the console stays silent (no blocked load, no error)."""
    from matplotlib.image import imread

    from grader.batch.charts import COLOUR

    run, out = first_run
    page = (out / "report.html").as_uri()
    assert {p.name for p in (out / "feedback").iterdir()} == {f"{i}.txt" for i in ("alice", "bob", "carol", "mallory")}
    command = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*command, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 2 and dom.stdout.count("<path") > 20, "both charts are in the page"
    for submission in ("alice", "bob", "carol", "mallory"):
        assert f'id="s-{submission}"' in dom.stdout, submission
    # Who needs help comes first (the refused zip, the untouched stubs, a zip of one file), then the table from the
    # lowest total up.
    assert dom.stdout.index('id="needs-help"') < dom.stdout.index('id="charts"') < dom.stdout.index('id="students"')
    needs_help = dom.stdout[dom.stdout.index('id="needs-help"'):dom.stdout.index('id="charts"')]
    assert re.findall(r'href="#s-(\w+)"', needs_help) == ["mallory", "bob", "carol"], needs_help
    assert "not started: every exercise is still the stub" in needs_help
    assert "<td>masking: masking.py is not in this submission</td>" in needs_help  # carol's first problem
    table = dom.stdout[dom.stdout.index('<table class="students">'):]
    assert re.findall(r'<tr id="s-(\w+)"', table) == ["mallory", "bob", "carol", "alice"]
    shot = tmp_path / "report.png"
    screenshot = subprocess.run([*command, "--window-size=1280,1600", f"--screenshot={shot}", page],
                                capture_output=True, text=True, timeout=120)
    assert screenshot.returncode == 0 and shot.is_file(), screenshot.stderr[-2000:]
    pixels = (imread(shot)[..., :3] * 255).round()
    bar = [int(COLOUR[i:i + 2], 16) for i in (1, 3, 5)]
    assert ((abs(pixels - bar) <= 2).all(axis=-1)).sum() > 2000, "the charts' bars are drawn"
    console = [line for line in dom.stderr.splitlines() + screenshot.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
