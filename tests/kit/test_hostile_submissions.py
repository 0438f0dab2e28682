"""Hostile submissions: none may crash or hang the grader, raise its score, or leave a process behind.

No submission here holds a working `attention`, so any score above 0 means its attack worked.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).resolve().parent / "submissions" / "hostile"
NAMES = sorted(p.name for p in HOSTILE.iterdir() if p.is_dir())
MARKER = b"KIT_HOSTILE_MARKER"
FAKE_REPORT_NAMES = ("grader-report.json", "results.json", ".report.json", "report.json")
LEFTOVER_GRACE_S = 3.0


def marked_processes() -> list[int]:
    """Pids of live processes whose command line carries the hostile marker (never this one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if MARKER in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # it exited while we looked
            continue
    return found


def leftover_processes() -> list[str]:
    """Waits up to LEFTOVER_GRACE_S for marked processes to go, then kills and describes the rest."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (pids := marked_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        survivors.append(f"pid {pid}: {cmdline.strip()}")
    return survivors


def remove_fake_reports(*folders: Path) -> None:
    """Deletes report files the fake_reports submission may have left, recognised by the marker."""
    for folder in folders:
        for name in FAKE_REPORT_NAMES:
            path = folder / name
            try:
                if MARKER in path.read_bytes():
                    path.unlink()
            except OSError:
                continue


@dataclass
class HostileRun:
    name: str
    run: Any  # the conftest's Run
    leftovers: list[str]


@pytest.fixture(scope="module", params=NAMES)
def hostile(request, grader_cli, tmp_path_factory) -> HostileRun:
    """Grades one hostile submission once; every test below reads the same run."""
    name = request.param
    assert not marked_processes(), "marked processes were alive before grading started"
    # A copy, so that writes to the folders around it land in a temporary folder, not in the kit.
    workdir = tmp_path_factory.mktemp(name)
    submission = workdir / "submission"
    shutil.copytree(HOSTILE / name, submission)
    run = grader_cli.check(submission, workdir / "report.json")
    leftovers = leftover_processes()
    remove_fake_reports(workdir, workdir.parent, Path.home(), Path("/tmp"), REPO, Path.cwd())
    return HostileRun(name, run, leftovers)


def test_grading_finishes_within_the_time_bound(hostile: HostileRun):
    assert not hostile.run.timed_out, hostile.run.describe()


def test_grading_completes_with_exit_status_0(hostile: HostileRun):
    assert hostile.run.returncode == 0, hostile.run.describe()


def test_report_follows_the_contract(hostile: HostileRun):
    assert hostile.run.report is not None, f"no report written\n{hostile.run.describe()}"
    problems = hostile.run.report_problems()
    assert not problems, "report breaks the contract:\n" + "\n".join(problems)


def test_attack_does_not_raise_the_score(hostile: HostileRun):
    assert isinstance(hostile.run.report, dict), hostile.run.describe()
    attention = hostile.run.exercise("attention")
    if hostile.name == "read_solutions" and hostile.run.report.get("sandbox") == "none":
        # Unisolated grading can read any file the user can; the report and the warning say so.
        pytest.xfail("without bubblewrap the worker can read the kit's files (reported as sandbox: none)")
    assert attention["score"] == 0, f"{hostile.name} scored {attention['score']}: its attack worked"
    assert hostile.run.report["score"] == 0


def test_no_spawned_process_outlives_grading(hostile: HostileRun):
    assert not hostile.leftovers, "still alive after grading (now killed):\n" + "\n".join(hostile.leftovers)
