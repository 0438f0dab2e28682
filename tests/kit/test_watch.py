"""`grader watch` as a student sees it in a terminal: one next step, each failure once, a save that stops the check.

The watch runs under a pseudo-terminal and its output is read through pyte, a terminal emulator: what is tested is
the screen (what tmux would show), after rich's cursor moves and erasures, not the bytes written.
"""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pyte = pytest.importorskip("pyte")
psutil = pytest.importorskip("psutil")

REPO = Path(__file__).resolve().parents[2]
COLUMNS, LINES = 150, 200  # tall enough that a whole check stays on the screen
WAIT_S = 90.0


def submission_with(folder: Path, **sources: str) -> Path:
    """The stubs in `folder`, with some exercise files given as source text: `attention="..."`."""
    shutil.copytree(REPO / "exercises", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for exercise_id, source in sources.items():
        (folder / f"{exercise_id}.py").write_text(source, encoding="utf-8")
    return folder


def solution(exercise_id: str) -> str:
    return (REPO / "solutions" / f"{exercise_id}.py").read_text(encoding="utf-8")


class Terminal:
    """`grader watch ARGS` on a pseudo-terminal of COLUMNS x LINES, its screen kept by pyte."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        self.screen = pyte.Screen(COLUMNS, LINES)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        ours, theirs = pty.openpty()
        os.set_inheritable(theirs, True)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        terminal_env = {key: value for key, value in env.items() if key not in ("COLUMNS", "NO_COLOR")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader", "watch", *args], cwd=cwd, stdin=theirs, stdout=theirs, stderr=theirs,
            env={**terminal_env, "TERM": "xterm-256color", "LINES": str(LINES), "COLUMNS": str(COLUMNS)},
            start_new_session=True,
        )
        os.close(theirs)
        self._fd = ours
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._stream.feed(data)

    def text(self) -> str:
        with self._lock:
            return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def wait_for(self, condition, *, within: float = WAIT_S, what: str = "") -> str:
        """The screen once `condition(screen text)` holds; fails with the screen after `within` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            shown = self.text()
            if condition(shown):
                return shown
            time.sleep(0.05)
        pytest.fail(f"the screen never showed {what} within {within:g} s:\n{self.text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        os.close(self._fd)


def _cycle_done(saved: str | None = None):
    """Whether the screen shows a finished check (after a save of `saved`, if given)."""
    return lambda shown: "Watching" in shown and (saved is None or f"saved {saved}" in shown)


def test_each_failure_shows_once_and_one_next_step_in_every_line(grader_env, tmp_path: Path):
    """attention fails (softmax over the queries), masking is done, the rest are stubs: the first check grades every
    exercise, shows each failing test once (the early first failure is replaced by the table and the list), and one
    next step, attention, nowhere another exercise. A save that fixes attention makes head_attention the step."""
    from grader.judge import variants

    wrong = next(v for v in variants.mistakes("attention") if v.name == "softmax_over_queries")
    submission = submission_with(tmp_path / "exercises", attention=wrong.source, masking=solution("masking"))
    terminal = Terminal("--submission", str(submission), cwd=tmp_path, env=grader_env)
    try:
        first = terminal.wait_for(_cycle_done(), what="a finished check")
        assert re.search(r"masking\s.*10/10", first) and re.search(r"attention\s.*failing", first), first
        failures = re.findall(r"✘ (test_\w+) \(attention\)", first)
        assert failures, f"no failure listed:\n{first}"
        assert len(failures) == len(set(failures)), f"a failure shown twice:\n{first}"
        assert "first failure" not in first, first
        steps = [line for line in first.splitlines() if line.startswith("○")]
        assert len(steps) == 1 and "fix attention" in steps[0], f"one next step, attention:\n{first}"
        assert "start with" not in first and "Next: head_attention" not in first, first

        (submission / "attention.py").write_text(solution("attention"), encoding="utf-8")
        second = terminal.wait_for(_cycle_done("attention.py"), what="the check of the fix")
        assert re.search(r"attention\s.*10/10", second), second
        steps = [line for line in second.splitlines() if line.startswith("○")]
        assert len(steps) == 1 and "start with head_attention" in steps[0], f"one next step:\n{second}"
    finally:
        terminal.stop()


def test_a_save_during_a_check_stops_it_and_the_fix_is_graded_at_once(grader_env, tmp_path: Path):
    """An endless loop saved, then the fix 1.5 s later: the loop's check is stopped (its worker killed, nothing left
    spinning) and the fix's result shows within a check's usual time, not after the call's time limit (60 s here)."""
    fixed = solution("attention")
    endless = fixed.replace("    return ", "    while True:\n        pass\n    return ", 1)
    submission = submission_with(tmp_path / "exercises", attention=fixed)
    env = {**grader_env, "GRADER_CALL_TIMEOUT_S": "60"}
    terminal = Terminal("attention", "--submission", str(submission), cwd=tmp_path, env=env)
    try:
        terminal.wait_for(_cycle_done(), what="the first check")
        (submission / "attention.py").write_text(endless, encoding="utf-8")
        terminal.wait_for(lambda shown: "saved attention.py" in shown and "Watching" not in shown,
                          what="the endless loop's check starting")
        time.sleep(1.5)
        (submission / "attention.py").write_text(fixed + "\n# fixed\n", encoding="utf-8")
        saved_at = time.monotonic()
        shown = terminal.wait_for(lambda s: _cycle_done("attention.py")(s) and "10/10" in s, within=20,
                                  what="the fix's result")
        latency = time.monotonic() - saved_at
        assert latency < 15, f"the fix showed {latency:.1f} s after its save:\n{shown}"
        assert "was stopped" not in shown and "failing" not in shown, shown
        tree = psutil.Process(terminal.process.pid).children(recursive=True)
        before = sum(_cpu(p) for p in tree)
        time.sleep(1.0)
        spent = sum(_cpu(p) for p in tree) - before
        assert spent < 0.5, f"the watch's processes used {spent:.2f} s of CPU in 1 s at rest: the loop still runs"
    finally:
        terminal.stop()


def _cpu(process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def test_the_next_step_is_the_first_unfinished_exercise_and_names_what_the_view_did_not_grade():
    """In-process, on results made by hand: what `grader check`, `%grader` and the watch end with."""
    from grader.curriculum import EXERCISES
    from grader.grade.results import ExerciseResult, TestOutcome, TestResult
    from grader.view.next_step import next_step, say_next

    def result(exercise: str, outcome: str, **extra) -> ExerciseResult:
        causes = ("unwritten",) if outcome == "stub" else ()
        test = TestResult("t", TestOutcome.PASSED if outcome == "done" else TestOutcome.FAILED,
                          float(outcome == "done"), 1.0, "", causes=causes)
        return ExerciseResult(exercise, test.points, 1.0, () if extra.get("absent") else (test,), **extra)

    def line(*results: ExerciseResult) -> str:
        return say_next(next_step(results))

    stubs = [result(e, "stub") for e in ("multi_head_attention", "encoder", "decoder", "transformer")]
    # The screen: masking saved, what builds on it regraded; head_attention, a stub, was not graded here.
    said = line(result("masking", "done"), *stubs)
    assert said.startswith("4 exercises not implemented yet: start with multi_head_attention"), said
    assert said.endswith("Not checked in this run, so not known to be done: attention and head_attention."), said
    # Graded, head_attention comes first; a failing attention comes before every stub.
    assert line(result("attention", "done"), result("masking", "done"), result("head_attention", "stub"),
                *stubs).startswith("5 exercises not implemented yet: start with head_attention"), stubs
    assert line(result("attention", "failing"), result("masking", "done"), *stubs).startswith(
        "Next: fix attention in exercises/attention.py")
    # Blocked: the step is what it is blocked by, even when that was not graded as an exercise.
    blocked = result("multi_head_attention", "failing", blocked_by=("masking",))
    assert line(result("attention", "done"), blocked).startswith("Next: fix masking in exercises/masking.py")
    # Every exercise graded is done: the first not known to be done, and why.
    assert "first not known to be done is masking, not checked in this run" in line(result("attention", "done"))
    absent = [result(e, "done", absent="not in this submission") for e in ("masking", "head_attention")]
    assert "the next, masking, is not in this submission" in line(result("attention", "done"), *absent)
    assert line(*(result(e.id, "done") for e in EXERCISES)) == "Every exercise is done."
    # Only the tracks graded count: a check of the second track never sends its student to the first one.
    assert "first not known to be done is kv_cache, not checked in this run" in line(result("rope", "done"))
    modern = [e.id for e in EXERCISES if e.id not in ("attention", "masking", "head_attention", "multi_head_attention",
                                                      "positional_encoding", "sublayers", "encoder", "decoder",
                                                      "transformer")]
    assert line(*(result(e, "done") for e in modern)) == "Every exercise is done.", modern
    assert line(result("kv_cache", "failing", blocked_by=("rope",))).startswith("Next: fix rope in exercises/rope.py")
    crossed = result("kv_cache", "failing", blocked_by=("attention",))  # a prerequisite of another track still blocks
    assert line(result("rope", "done"), crossed).startswith("Next: fix attention in exercises/attention.py")
