"""Hostile submissions: none may crash or hang the grader, raise its score, leak a secret, or leave a process behind.

No submission here holds a working `attention`, so any score above 0 means its attack worked. Each
is graded at every isolation tier this machine can produce: `bubblewrap`; `user` (root, with a
`bwrap` that fails the way it does in Docker); `none` (uid 65534, no namespaces, --allow-unisolated).
The grader's environment holds a secret that must appear in nothing the grader prints or writes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import stat
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# Slow by nature: every attack graded cold at three tiers, each in a grader of its own, two at a time.
pytestmark = pytest.mark.slow
HOSTILE = Path(__file__).resolve().parent / "submissions" / "hostile"
NAMES = sorted(p.name for p in HOSTILE.iterdir() if p.is_dir())
MARKER = b"KIT_HOSTILE_MARKER"
FAKE_REPORT_NAMES = ("grader-report.json", "results.json", ".report.json", "report.json", "loot.txt")
SECRET = f"kit-secret-{secrets.token_hex(8)}"
TIERS = ("bubblewrap", "user", "none")
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
    tier: str
    run: Any  # the conftest's Run
    leftovers: list[str]


def _tier_problem(tier: str) -> str | None:
    from grader.host.bubblewrap import bwrap_problem

    if tier == "bubblewrap":
        return bwrap_problem()
    if os.geteuid() != 0:
        return f"the {tier} tier is tested as root (Gradescope, Docker CI): run the kit's tests as root"
    if tier == "none" and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    from grader.host import tiers

    if tier == "user" and not tiers.landlock_abi() and REPO.stat().st_mode & 0o005:
        # Correctly refused then (see the test below): the user tier needs Landlock or a hidden kit.
        return f"this kernel has no Landlock and {REPO} is readable by other users"
    return None


# Their processes carry the marker, or they write into folders every run shares: graded with nothing else running.
ALONE = frozenset({"fake_reports", "setsid_child", "signal_through_a_file", "steal_environment"})


@pytest.fixture(scope="module")
def hostile_runs(selected_params, grader_cli, grader_env, failing_bwrap, as_nobody
                 ) -> dict[tuple[str, str], HostileRun]:
    """Every (tier, submission) this session's tests read, each graded once, cold: two at a time (one per core),
    except those in ALONE, graded one by one afterwards, so that a leftover process is always the run's own."""
    chosen = [pair for pair in dict.fromkeys(selected_params("hostile")) if not _tier_problem(pair[0])]

    def grade(pair: tuple[str, str]) -> HostileRun:
        return _grade_hostile(*pair, grader_cli, grader_env, failing_bwrap, as_nobody)

    together = [pair for pair in chosen if pair[1] not in ALONE]
    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(together, pool.map(grade, together), strict=True))
    runs.update((pair, grade(pair)) for pair in chosen if pair[1] in ALONE)
    return runs


@pytest.fixture(scope="module", params=[(tier, name) for tier in TIERS for name in NAMES],
                ids=[f"{tier}-{name}" for tier in TIERS for name in NAMES])
def hostile(request, hostile_runs) -> HostileRun:
    """One hostile submission graded at one tier; every test below reads the same run."""
    tier, name = request.param
    problem = _tier_problem(tier)
    if problem:
        pytest.skip(f"no {tier} tier here: {problem}")
    return hostile_runs[(tier, name)]


def _grade_hostile(tier, name, grader_cli, grader_env, failing_bwrap, as_nobody) -> HostileRun:
    assert not marked_processes(), "marked processes were alive before grading started"
    # A copy, so that writes to the folders around it land in a temporary folder, not in the kit;
    # one that uid 65534 can use, for the `none` tier.
    workdir = Path(tempfile.mkdtemp(prefix=f"kit-hostile-{name}-"))
    workdir.chmod(0o777)
    submission = workdir / "submission"
    shutil.copytree(HOSTILE / name, submission)
    for path in [submission, *submission.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    env = {**grader_env, "KIT_GRADER_SECRET": SECRET, "HOME": str(workdir)}
    if name == "infinite_loop":
        # Each hung call runs into the per-call limit, twice before the function is given up: what is checked is
        # that the limit holds and grading goes on, not its default length (20 s, twice, at every tier).
        env["GRADER_CALL_TIMEOUT_S"] = "2"
    if name == "memory_blowup":  # likewise the memory limit: that it holds, not how much writing 4 GiB takes
        env["GRADER_MEMORY_LIMIT_MB"] = "1536"
    prefix: tuple[str, ...] = ()
    more: tuple[str, ...] = ()
    if tier != "bubblewrap":
        env["GRADER_BWRAP"] = str(failing_bwrap)
    if tier == "none":
        prefix = as_nobody
        more = ("--allow-unisolated",)
    try:
        run = grader_cli.run("check", "attention", *more, "--submission", str(submission), cwd=workdir, env=env,
                             prefix=prefix, json_path=workdir / "report.json")
        leftovers = leftover_processes()
        remove_fake_reports(workdir, Path("/tmp"), REPO, Path.cwd())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return HostileRun(name, tier, run, leftovers)


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
    exposed = " ".join(hostile.run.report.get("warnings", []))
    if hostile.name == "read_solutions" and hostile.tier == "none" and "can: " in exposed and "read " in exposed:
        # Without Landlock the none tier runs as the grader's user and reads what it reads; the report says so.
        pytest.xfail("the none tier without Landlock lets a worker read the kit's files (its report says so)")
    assert attention["score"] == 0, f"{hostile.name} scored {attention['score']}: its attack worked"
    assert hostile.run.report["score"] == 0


def test_no_spawned_process_outlives_grading(hostile: HostileRun):
    assert not hostile.leftovers, "still alive after grading (now killed):\n" + "\n".join(hostile.leftovers)


def test_report_names_the_tier(hostile: HostileRun):
    assert isinstance(hostile.run.report, dict), hostile.run.describe()
    assert hostile.run.report["sandbox"] == hostile.tier, hostile.run.describe()
    if hostile.tier != "bubblewrap":
        assert any(w.startswith(f"sandbox: {hostile.tier}") for w in hostile.run.report["warnings"])
        assert f"sandbox: {hostile.tier}" in hostile.run.stderr, "the warning goes to stderr"


def test_no_secret_of_the_grader_in_any_output(hostile: HostileRun):
    report = json.dumps(hostile.run.report)
    for where, text in (("stdout", hostile.run.stdout), ("stderr", hostile.run.stderr), ("report", report)):
        assert SECRET not in text, f"the grader's secret leaked into its {where}"


def test_without_isolation_grading_with_the_solutions_installed_is_refused(grader_cli, grader_env, failing_bwrap,
                                                                         as_nobody):
    """uid 65534, no namespaces, the kit's solutions installed: exit 2 and one line that says how to go on."""
    problem = _tier_problem("none")
    if problem:
        pytest.skip(problem)
    workdir = Path(tempfile.mkdtemp(prefix="kit-refused-"))
    workdir.chmod(0o777)
    try:
        env = {**grader_env, "GRADER_BWRAP": str(failing_bwrap), "HOME": str(workdir)}
        run = grader_cli.run("check", "attention", "--submission", str(REPO / "exercises"), cwd=workdir, env=env,
                             prefix=as_nobody)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert run.returncode == 2, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "--allow-unisolated" in lines[0], run.describe()
    assert "Traceback" not in run.stderr


def test_root_without_landlock_and_with_readable_solutions_falls_to_none_and_is_refused(grader_cli, grader_env,
                                                                                       failing_bwrap):
    """The user tier hides the kit by Landlock, or by permissions: with neither it is not claimed."""
    if os.geteuid() != 0:
        pytest.skip("the user tier is root's")
    if (REPO.stat().st_mode & 0o005) == 0:
        pytest.skip(f"{REPO} is already hidden from other users: the user tier holds without Landlock")
    env = {**grader_env, "GRADER_BWRAP": str(failing_bwrap), "GRADER_LANDLOCK": "off"}
    run = grader_cli.run("check", "attention", "--submission", str(REPO / "exercises"), env=env)
    assert run.returncode == 2, run.describe()
    assert "readable by other users" in run.stderr and "chmod" in run.stderr, run.describe()
