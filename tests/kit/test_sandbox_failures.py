"""When the sandbox itself fails, the grader says so and retries; it never turns that into a student's score."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.host.bubblewrap import bwrap_problem
from grader.host.session import GradingSession
from grader.host.trees import kill_tree

REPO = Path(__file__).resolve().parents[2]

# Passes the grader's bubblewrap probe (the only sandbox that sees the host at /host) and fails every real
# sandbox, the way a machine whose user namespaces break halfway would.
LATE_FAILING_BWRAP = """#!/bin/sh
case "$*" in *"--ro-bind / /host"*) exec "{bwrap}" "$@";; esac
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
"""

# Runs bubblewrap with libseccomp's bindings replaced by a stand-in whose filters do nothing: a
# machine where the worker's lock silently does not hold.
HOLLOW_SECCOMP_BWRAP = """#!/bin/sh
# The stand-in is bound last, just before the command ("--"), so that no later bind hides it.
for arg; do
    shift
    if [ "$arg" = "--" ]; then set -- "$@" --ro-bind "{hollow}" "{pyseccomp}"; fi
    set -- "$@" "$arg"
done
exec "{bwrap}" "$@"
"""
HOLLOW_PYSECCOMP = """
ALLOW, MASKED_EQ, NE, EQ = 0, 1, 2, 3
def ERRNO(number): return number
def Arg(*args): return args
class SyscallFilter:
    def __init__(self, default): pass
    def add_rule(self, *args): pass
    def load(self): pass
"""

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap unusable here: {bwrap_problem()}")


@pytest.fixture
def late_failing_bwrap(open_folder: Path) -> Path:
    return _script(open_folder, LATE_FAILING_BWRAP)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder uid 65534 can read (bubblewrap runs as 65534 when the tests run as root): not under tmp_path."""
    folder = Path(tempfile.mkdtemp(prefix="kit-bwrap-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _script(folder: Path, text: str, **more: str) -> Path:
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap is not installed")
    script = folder / "bwrap"
    script.write_text(text.format(bwrap=real, **more))
    script.chmod(0o755)
    return script


@needs_bwrap
def test_a_sandbox_that_fails_its_self_test_is_not_used_and_the_report_says_why(grader_cli, tmp_path, monkeypatch,
                                                                                   open_folder):
    hollow = open_folder / "pyseccomp.py"
    hollow.write_text(HOLLOW_PYSECCOMP)
    real = Path(importlib.util.find_spec("pyseccomp").origin).resolve()
    monkeypatch.setenv("GRADER_BWRAP", str(_script(open_folder, HOLLOW_SECCOMP_BWRAP, hollow=str(hollow),
                                                    pyseccomp=str(real))))
    run = grader_cli.check(REPO / "solutions", tmp_path / "report.json")
    assert run.returncode == 0, run.describe()
    # Root without a working bubblewrap has the user tier next.
    fallback = "user" if os.geteuid() == 0 else "none"
    assert run.report["sandbox"] == fallback, run.report["sandbox"]
    warning = " ".join(run.report["warnings"])
    assert "failed its self-test" in warning and "start a process" in warning, warning
    assert run.report["score"] == 10

    submissions = tmp_path / "class"
    (submissions / "alice").mkdir(parents=True)
    shutil.copyfile(REPO / "solutions" / "attention.py", submissions / "alice" / "attention.py")
    batch = grader_cli.run("batch", str(submissions), "--out", str(tmp_path / "out"), "--jobs", "1",
                           "--suite", "public")
    assert batch.returncode == 0, batch.describe()
    report = json.loads((tmp_path / "out" / "alice.json").read_text())
    assert report["status"] == "graded" and report["sandbox"] == fallback, (report["status"], report["sandbox"])
    assert "failed its self-test" in " ".join(report["warnings"]), report["warnings"]


@needs_bwrap
def test_a_sandbox_that_will_not_start_fails_the_check_with_exit_3_and_no_score(grader_cli, late_failing_bwrap,
                                                                                 tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_BWRAP", str(late_failing_bwrap))
    run = grader_cli.check(REPO / "solutions", tmp_path / "report.json")
    assert run.returncode == 3, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "the grader itself failed" in lines[0] and "sandbox" in lines[0], run.stderr
    assert "Traceback" not in run.stderr
    assert run.report is None, "a score was written for a run whose sandbox never started"


@needs_bwrap
def test_batch_retries_a_broken_sandbox_then_reports_a_grader_failure_that_a_rerun_grades(
        grader_cli, late_failing_bwrap, tmp_path, monkeypatch):
    submissions = tmp_path / "class"
    (submissions / "alice").mkdir(parents=True)
    shutil.copyfile(REPO / "solutions" / "attention.py", submissions / "alice" / "attention.py")
    out = tmp_path / "out"
    monkeypatch.setenv("GRADER_BWRAP", str(late_failing_bwrap))
    run = grader_cli.run("batch", str(submissions), "--out", str(out), "--jobs", "1", "--suite", "public")
    assert run.returncode == 3, run.describe()
    report = json.loads((out / "alice.json").read_text())
    assert report["status"] == "failed", report["status"]
    assert "sandbox" in " ".join(report["warnings"]) and "2 times" in " ".join(report["warnings"]), report["warnings"]
    monkeypatch.delenv("GRADER_BWRAP")
    rerun = grader_cli.run("batch", str(submissions), "--out", str(out), "--jobs", "1", "--suite", "public")
    assert rerun.returncode == 0, rerun.describe()
    report = json.loads((out / "alice.json").read_text())
    assert report["status"] == "graded" and report["exercises"][0]["score"] == 10, report


@needs_bwrap
def test_a_worker_whose_sandbox_died_before_it_started_is_retried_in_a_fresh_sandbox():
    session = GradingSession.open(REPO / "solutions", device="cpu")
    try:
        # kill_tree, not one pass over the children: a process bwrap forks while we list them would escape.
        assert kill_tree(session.workers.sandbox.process.pid), "the sandbox could not be killed"
        q = torch.randn(2, 3, 4)
        output, _ = session.impl().attention.attention(q, q, q)
        assert output.shape == (2, 3, 4)
        assert len(session.workers.owned) == 2, "the call did not run in a fresh sandbox"
        assert session.connection.sandbox_failure is None
    finally:
        session.close()


def test_a_sandbox_gone_before_its_first_worker_is_asked_for_makes_the_run_the_graders_failure():
    """The race the late-failing bubblewrap can lose or win: the sandbox may be gone when the first worker is
    asked for (the spawn request fails) rather than when it is awaited. Either way, one fresh sandbox is tried,
    and then no test is the submission's failure: the run is the grader's (exit 3, no score)."""
    from grader.host.connection import Connection
    from grader.host.limits import Limits, WorkerStartError

    tried = []

    def gone(*, memory_above=None):
        tried.append(1)
        raise WorkerStartError("the sandbox is gone: bwrap: setting up uid map: Permission denied")

    connection = Connection(start=gone, limits=Limits.from_environment(), restart=gone)
    for _ in range(3):
        with pytest.raises(WorkerStartError):
            connection.ensure_started()
    assert len(tried) == 2, "the sandbox should be replaced once, and not asked again after that"
    assert "setting up uid map" in (connection.sandbox_failure or "")
