"""The student loop: `grader hint`, `grader watch`, `grader show attention` and `grader list`'s statuses.

Each test runs the command line in its own folder, so that the `.grader/` state it leaves is its own.
"""

from __future__ import annotations

import ast
import importlib.util
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.curriculum import EXERCISES
from grader.student.hints import HINTS

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
EXERCISE_IDS = ("attention", "masking", "head_attention", "multi_head_attention", "positional_encoding",
                "sublayers", "encoder", "decoder", "transformer")
WATCH_TIMEOUT_S = 90.0


def assert_one_line_usage_error(run) -> None:
    assert run.returncode == 2, run.describe()
    assert "Traceback" not in run.stdout + run.stderr, run.describe()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{run.stderr}"


def submission_with(tmp_path: Path, **files: Path) -> Path:
    """A folder holding the stubs, with some exercise files replaced: `attention=REPO / "solutions" / ...`."""
    folder = tmp_path / "exercises"
    shutil.copytree(REPO / "exercises", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for exercise_id, source in files.items():
        shutil.copyfile(source, folder / f"{exercise_id}.py")
    return folder


# --- grader hint --------------------------------------------------------------------------------


def test_hints_come_one_level_at_a_time_then_say_they_are_all_seen(grader_cli, tmp_path: Path):
    count = len(HINTS["attention"])
    for level in (1, 2):
        run = grader_cli.run("hint", "attention", cwd=tmp_path)
        assert run.returncode == 0, run.describe()
        assert f"hint {level} of {count}" in run.stdout, run.describe()
    last = grader_cli.run("hint", "attention", "--level", str(count), cwd=tmp_path)
    assert f"hint {count} of {count}" in last.stdout and "last hint" in last.stdout, last.describe()
    assert "```" not in last.stdout, "the hint's Markdown should be rendered, not printed raw"
    done = grader_cli.run("hint", "attention", cwd=tmp_path)
    assert done.returncode == 0 and f"all {count} hints" in done.stdout, done.describe()
    other = grader_cli.run("hint", "masking", cwd=tmp_path)
    assert "hint 1 of" in other.stdout, f"each exercise keeps its own place:\n{other.describe()}"


@pytest.mark.parametrize("args", [
    ("hint", "no_such_exercise"),
    ("hint", "attention", "--level", "99"),
    ("hint", "attention", "--level", "0"),
    ("hint", "attention", "--level", "two"),
])
def test_bad_hint_requests_are_one_line_usage_errors(grader_cli, tmp_path: Path, args: tuple[str, ...]):
    assert_one_line_usage_error(grader_cli.run(*args, cwd=tmp_path))


def _function_bodies(path: Path) -> list[tuple[str, list[str]]]:
    """(name, code lines without whitespace) of every function in `path`, docstring and super() left out."""
    bodies = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        statements = node.body
        if statements and isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant):
            statements = statements[1:]
        lines = [_squash(line) for statement in statements for line in ast.unparse(statement).splitlines()]
        lines = [line for line in lines if line and line != "super().__init__()"]
        if lines:
            bodies.append((f"{path.stem}.{node.name}", lines))
    return bodies


def _squash(code: str) -> str:
    return re.sub(r"\s+", "", code).replace('"', "'")


def test_every_exercise_has_progressive_hints_that_stop_short_of_the_solution():
    every = [exercise.id for exercise in EXERCISES]  # every track's
    assert set(HINTS) == set(every)
    solutions = [REPO / "solutions" / f"{exercise_id}.py" for exercise_id in every]
    bodies = [body for path in solutions for body in _function_bodies(path)]
    assert len(bodies) > 20, "the solutions' functions were not found"
    for exercise_id, hints in HINTS.items():
        assert len(hints) >= 3, f"{exercise_id} has {len(hints)} hints: give the idea, then more, then a line's shape"
        assert "```python" in hints[-1], f"the last hint of {exercise_id} should show the shape of a line"
        for level, hint in enumerate(hints, start=1):
            squashed = _squash(hint)
            for name, lines in bodies:
                assert not all(line in squashed for line in lines), (
                    f"hint {level} of {exercise_id} contains the whole body of the solution's {name}")


# --- grader show attention ----------------------------------------------------------------------


def test_show_attention_draws_the_worked_example_for_the_reference(grader_cli, tmp_path: Path):
    run = grader_cli.run("show", "attention", "--submission", str(REPO / "solutions"), cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    first_row = re.search(r"Token 1 \[1, 0, 1, 0\]\s+0\.2976\s+0\.1095\s+0\.1805\s+0\.1805\s+0\.2318", run.stdout)
    assert first_row, f"the course notes' first row of weights is missing:\n{run.stdout}"
    assert re.search(r"Token 2 \[0, 1, 0, 1\]\s+0\.2689\s+0\.7311\s+0\.0000", run.stdout), (
        f"the causal example's second row is missing:\n{run.stdout}")
    assert "✘" not in run.stdout, run.stdout


def test_show_attention_on_the_stubs_says_what_to_do_next(grader_cli, tmp_path: Path):
    run = grader_cli.run("show", "attention", "--submission", str(REPO / "exercises"), cwd=tmp_path)
    assert run.returncode == 1, run.describe()
    assert "Traceback" not in run.stdout + run.stderr, run.describe()
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(lines) == 2, f"expected one line per example, got:\n{run.stdout}"
    assert "not implemented yet" in lines[0] and "exercises/attention.py" in lines[0], run.stdout
    assert "exercises/masking.py" in lines[1], run.stdout


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="matplotlib is installed here")
def test_show_png_without_matplotlib_says_how_to_install_it(grader_cli, tmp_path: Path):
    run = grader_cli.run("show", "attention", "--png", str(tmp_path / "weights.png"), cwd=tmp_path)
    assert_one_line_usage_error(run)
    assert 'pip install -e ".[plots]"' in run.stderr, run.describe()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs the plots extra (matplotlib)")
def test_show_png_writes_an_image(grader_cli, tmp_path: Path):
    image = tmp_path / "weights.png"
    run = grader_cli.run("show", "attention", "--submission", str(REPO / "solutions"), "--png", str(image),
                         cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "--png did not write a PNG file"


# --- grader list --------------------------------------------------------------------------------


def _row(stdout: str, exercise_id: str) -> str:
    rows = [line for line in stdout.splitlines() if re.search(rf"\b{exercise_id}\.py\b", line)]
    assert len(rows) == 1, f"no single row for {exercise_id} in:\n{stdout}"
    return rows[0]


def test_list_shows_each_exercise_status_after_a_check(grader_cli, tmp_path: Path):
    submission_with(tmp_path, attention=REPO / "solutions" / "attention.py")
    before = grader_cli.run("list", cwd=tmp_path)
    assert before.returncode == 0, before.describe()
    assert "not checked yet" in _row(before.stdout, "attention"), before.stdout

    check = grader_cli.run("check", "attention", "masking", "--quick", cwd=tmp_path)
    assert check.returncode == 0, check.describe()
    after = grader_cli.run("list", cwd=tmp_path)
    assert "done" in _row(after.stdout, "attention"), after.stdout
    assert "not started" in _row(after.stdout, "masking"), after.stdout
    assert "not checked yet" in _row(after.stdout, "head_attention"), after.stdout
    assert "10/100 points" in after.stdout, after.stdout


def test_progress_is_the_submissions_from_any_folder_and_no_folder_gets_a_file(grader_cli, grader_env, tmp_path: Path):
    """Checked from one folder, listed from three: the same result each time, kept in the user's state folder (here
    GRADER_STATE_DIR); the folders the commands ran in, and the submission, get no file."""
    submission = submission_with(tmp_path / "kit", attention=REPO / "solutions" / "attention.py")
    state = tmp_path / "state"
    env = {**grader_env, "GRADER_STATE_DIR": str(state)}
    folders = [tmp_path / name for name in ("home", "desktop", "elsewhere")]
    for folder in folders:
        folder.mkdir()
    before = sorted(tmp_path.rglob("*"))
    check = grader_cli.run("check", "attention", "--quick", "--submission", str(submission), cwd=folders[0], env=env)
    assert check.returncode == 0, check.describe()
    for folder in folders:
        listed = grader_cli.run("list", "--submission", str(submission), cwd=folder, env=env)
        assert listed.returncode == 0 and "done" in _row(listed.stdout, "attention"), listed.describe()
        assert "10/100 points" in listed.stdout, listed.stdout
    after = sorted(path for path in tmp_path.rglob("*") if state not in path.parents and path != state)
    assert after == before, f"files the user did not ask for: {sorted(set(after) - set(before))}"
    assert (state / "last-report.json").is_file()


def test_a_submission_with_some_exercises_is_graded_for_those_and_says_so_of_the_others(grader_cli, tmp_path: Path):
    """attention.py and multi_head_attention.py alone: attention graded in full, masking one line (its file is not
    there), MultiHeadAttention one line (it builds on masking.py): no failures, no blocked-by chains, 0 points for
    each, out of the whole curriculum's."""
    folder = tmp_path / "part"
    folder.mkdir()
    for name in ("attention.py", "multi_head_attention.py"):
        shutil.copyfile(REPO / "solutions" / name, folder / name)
    run = grader_cli.run("check", "--submission", str(folder), cwd=tmp_path, json_path=tmp_path / "report.json")
    assert run.returncode == 0, run.describe()
    exercises = {e["id"]: e for e in run.report["exercises"]}
    assert exercises["attention"]["score"] == 10 and run.report["score"] == 10 and run.report["max_score"] == 100
    assert exercises["masking"]["absent"] == "masking.py is not in this submission"
    assert exercises["multi_head_attention"]["absent"] == "it builds on masking.py, which is not in this submission"
    for absent in (e for e in exercises.values() if e["id"] != "attention"):
        assert absent["score"] == 0 and absent["tests"] == [] and absent["blocked_by"] == [], absent
    assert "masking: masking.py is not in this submission" in run.stdout, run.stdout
    assert "blocked by" not in run.stdout and "was not found" not in run.stdout, run.stdout
    assert len(run.stdout.splitlines()) < 30, f"one line per exercise not submitted:\n{run.stdout}"


def test_a_notebook_is_graded_for_its_exercise_alone(grader_cli, tmp_path: Path):
    run = grader_cli.run("check", "--submission", str(REPO / "notebooks" / "01-attention.ipynb"), cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    assert "not implemented yet — open cell" in run.stdout, run.stdout
    assert run.stdout.count("is not in this submission") == 8, run.stdout
    assert "✘" not in run.stdout, f"no failures for exercises the notebook does not hold:\n{run.stdout}"


# --- grader watch -------------------------------------------------------------------------------


class Watcher:
    """`grader watch` in the background, its output read line by line."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader", "watch", *args], cwd=cwd, env=env, text=True,
            errors="replace", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []  # read as it comes: a full stderr pipe would stall the watch, not end it
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def wait_for(self, text: str, *, count: int = 1) -> str:
        """Everything printed so far, once `text` has appeared `count` times."""
        deadline = time.monotonic() + WATCH_TIMEOUT_S
        while sum(text in line for line in self.seen) < count:
            try:
                self.seen.append(self.lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                self.stop()
                pytest.fail(f"`grader watch` never printed {text!r} {count} time(s):\n{''.join(self.seen)}")
        return "".join(self.seen)

    def stop(self) -> tuple[int | None, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None, f"(still running 30 s after Ctrl-C; {len(self.errors)} lines on stderr)\n" + "".join(
                self.errors[-20:])
        time.sleep(0.2)  # the reader thread takes the last lines
        return self.process.returncode, "".join(self.errors)


def test_watch_checks_again_after_a_save_and_stops_cleanly_on_ctrl_c(grader_env, tmp_path: Path):
    submission = submission_with(tmp_path)
    watcher = Watcher("attention", "--submission", str(submission), cwd=tmp_path, env=grader_env)
    try:
        first = watcher.wait_for("Watching")
        assert re.search(r"attention\s.*0/10", first), f"the first check should grade the stub:\n{first}"
        shutil.copyfile(REPO / "solutions" / "attention.py", submission / "attention.py")
        second = watcher.wait_for("Watching", count=2)
        assert "saved attention.py" in second, second
        assert re.search(r"attention\s.*10/10", second), f"the save was not graded:\n{second}"
    finally:
        code, stderr = watcher.stop()
    rest = "".join(watcher.seen)
    time.sleep(0.2)
    while not watcher.lines.empty():
        rest += watcher.lines.get()
    assert code == 0, f"exit {code} after Ctrl-C; stderr:\n{stderr}"
    assert "Traceback" not in rest + stderr and "Stopped watching." in rest, f"{rest}\n{stderr}"


def test_watch_without_an_exercise_grades_every_exercise_first_whatever_an_earlier_run_said(grader_cli,
                                                                                           tmp_path: Path):
    """An earlier run left attention done, but attention.py is a stub again: what this watch has not graded is
    unknown, so its first check grades every exercise, and its one next step is attention."""
    import torch
    from conftest import state_for

    from grader.grade.reports import GradeReport
    from grader.grade.scoring import score
    from grader.student import state

    submission = submission_with(tmp_path)
    tests = [{"nodeid": "tests/public/test_attention.py::test_it", "outcome": "passed",
              "metadata": {"exercise": "attention", "points": 1, "message": ""}}]
    earlier = GradeReport(str(submission), "public", "cpu", 1.0, torch.__version__,
                          tuple(score({"tests": tests}, ["attention"], frozenset())))
    assert state.record_report(earlier, submission, quick=True, folder=state_for(tmp_path))
    run = grader_cli.run("watch", "--max-runs", "1", cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    assert "grader check masking" not in run.stdout and re.search(r"transformer\s.*0/15", run.stdout), run.stdout
    assert "9 exercises not implemented yet: start with attention" in run.stdout, run.stdout


def test_watch_regrades_a_finished_exercise_whose_file_is_saved_broken(grader_cli, grader_env, tmp_path: Path):
    """attention is done, so the watch works on masking; a save that breaks attention.py regrades attention too
    (and masking, the current one; not the stubs built on attention), the one next step is attention again, and
    `grader list` then shows attention failing, not done."""
    submission = submission_with(tmp_path, attention=REPO / "solutions" / "attention.py")
    env = {**grader_env, "GRADER_STATE_DIR": str(tmp_path / "state")}
    watcher = Watcher("--submission", str(submission), cwd=tmp_path, env=env)
    try:
        first = watcher.wait_for("Watching")
        assert "start with masking" in first and re.search(r"attention\s.*done", first), first
        broken = (REPO / "solutions" / "attention.py").read_text().replace("softmax(dim=-1)", "softmax(dim=-2)")
        (submission / "attention.py").write_text(broken)
        second = watcher.wait_for("Watching", count=2).split("Watching")[1]
        assert "grader check attention masking" in second and "saved attention.py" in second, second
        assert re.search(r"attention\s.*failing", second), f"the broken save was not graded:\n{second}"
        assert "Next: fix attention" in second and "start with" not in second, f"one next step:\n{second}"
    finally:
        watcher.stop()
    listed = grader_cli.run("list", "--submission", str(submission), cwd=tmp_path, env=env)
    assert "failing" in _row(listed.stdout, "attention"), listed.stdout


def _graded_part(output: str) -> list[str]:
    """What `grader check` shows of a grade, from the table to the next step (not included: it names the folder,
    and a watch knows what it graded before)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))  # the title above names the folder
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Graded in"))
    return [line.rstrip() for line in lines[start:end - 1]]


def test_watch_grades_every_save_as_a_cold_check_would_and_leaves_nothing_behind(grader_cli, grader_env,
                                                                                  tmp_path: Path):
    """Wrong, right, hostile (it leaves processes behind to sabotage the next check), right again: the warm
    watch shows what four cold `grader check`s show, and after Ctrl-C nothing it started is left."""
    psutil = pytest.importorskip("psutil")
    from grader.judge import variants

    wrong = next(v for v in variants.mistakes("attention") if v.name == "no_scaling")
    versions = [("wrong", wrong.source), ("right", (REPO / "solutions" / "attention.py").read_text()),
                ("hostile", (SUBMISSIONS / "isolation" / "lurker" / "attention.py").read_text()),
                ("right again", (REPO / "solutions" / "attention.py").read_text())]
    cold = []
    for _, source in versions:
        folder = submission_with(tmp_path / f"cold-{len(cold)}")
        (folder / "attention.py").write_text(source)
        run = grader_cli.run("check", "attention", "--quick", "--submission", str(folder), cwd=tmp_path)
        assert run.returncode == 0, run.describe()
        cold.append(_graded_part(run.stdout))
    assert "10/10" not in "".join(cold[0]) and "10/10" in "".join(cold[1]), cold

    submission = submission_with(tmp_path / "warm")
    (submission / "attention.py").write_text(versions[0][1])
    watcher = Watcher("attention", "--submission", str(submission), cwd=tmp_path, env=grader_env)
    try:
        shown = [watcher.wait_for("Watching")]
        for count, (_, source) in enumerate(versions[1:], start=2):
            time.sleep(0.05)
            (submission / "attention.py").write_text(source)
            shown.append(watcher.wait_for("Watching", count=count))
        started = {p.pid for p in psutil.Process(watcher.process.pid).children(recursive=True)}
    finally:
        code, stderr = watcher.stop()
    assert code == 0 and "Traceback" not in stderr, stderr
    checks = "".join(watcher.seen).split("Watching")[:-1]
    assert len(checks) == 4, checks
    for (name, _), warm_output, cold_output in zip(versions, checks, cold, strict=True):
        assert _graded_part(warm_output) == cold_output, f"{name}: the watch showed\n{warm_output}\ncold: {cold_output}"
    failures = [line for line in checks[0].splitlines() if line.startswith("✘")]
    assert failures and len(failures) == len(set(failures)), f"each failure once:\n{checks[0]}"
    time.sleep(1.0)
    alive = [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert not alive, f"processes the watch started outlived it: {alive}"


def test_every_code_line_of_a_hint_runs_in_its_stub():
    """Each statement of a hint's code, run where a student pastes it: the stub's imports for globals, and for the
    other names the values they hold in the reference at that point (its functions' locals, caught as each returns
    while its exercise's diagnosis scenario runs). A NameError (`math` not imported in the stub) fails. A statement
    with a placeholder (`EncoderLayer(...)`) or whose names no reference function holds is checked by its names:
    every module-level name it uses must be one in the stub."""
    import builtins
    import importlib

    import torch

    from grader.judge import diagnosis

    ran = 0
    for exercise_id, levels in HINTS.items():
        stub = importlib.import_module(f"exercises.{exercise_id}")
        reference = importlib.import_module(f"solutions.{exercise_id}")
        frames = _reference_locals(exercise_id, reference.__file__, diagnosis)
        assert frames, f"no function of solutions/{exercise_id}.py ran in its scenario"
        for block in (b for hint in levels for b in re.findall(r"```python\n(.*?)```", hint, re.S)):
            assigned: dict[str, object] = {}
            for statement in ast.parse(block).body:
                names = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                bound = {n.arg for n in ast.walk(statement) if isinstance(n, ast.arg)}  # a lambda's parameters
                bound |= {n.id for c in ast.walk(statement) if isinstance(c, ast.comprehension)
                          for n in ast.walk(c.target) if isinstance(n, ast.Name)}
                free = names - bound - set(dir(builtins)) - set(assigned)
                local = free - set(vars(stub))
                placeholder = any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(statement))
                frame = next((f for f in frames if local <= set(f) and all(f[n] is not None for n in local)), None)
                line = ast.unparse(statement)
                if frame is None or placeholder:
                    missing = sorted(name for name in free & set(vars(reference)) if name not in vars(stub))
                    assert not missing, f"{exercise_id}'s hint uses {missing}, which its stub does not import: {line}"
                    continue
                namespace = {**vars(stub), **frame, **assigned}  # one namespace: a lambda in the line sees it all
                try:
                    with torch.no_grad():
                        exec(compile(ast.Module([statement], []), "<hint>", "exec"), namespace)
                except Exception as error:
                    raise AssertionError(f"{exercise_id}'s hint line fails in its stub: {line}\n"
                                         f"{type(error).__name__}: {error}") from None
                stored = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                assigned.update((name, namespace[name]) for name in stored if name in namespace)
                ran += 1
    assert ran >= 10, f"only {ran} hint statements ran: the reference's locals were not caught"


def _reference_locals(exercise_id: str, path: str, diagnosis) -> list[dict[str, object]]:
    """The locals of each function of the reference file, caught as it returns, over the exercise's scenario."""
    caught: list[dict[str, object]] = []

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_filename == path:
            caught.append(dict(frame.f_locals))

    sys.setprofile(profile)
    try:
        diagnosis.run_scenario(exercise_id, diagnosis.REFERENCE)
    finally:
        sys.setprofile(None)
    return caught


def test_a_save_regrades_what_builds_on_it_only_where_it_was_graded_submitted_and_started(tmp_path: Path):
    """After a save of attention: attention, the current exercise, and what builds on attention that this watch
    graded; not what is not in the submission (a single notebook's other exercises), nor a stub (a save of another
    file cannot start it), nor what was never graded; every exercise at the session's first check."""
    from grader.grade.results import ExerciseResult, TestOutcome, TestResult
    from grader.student.watch import to_check

    def result(exercise: str, outcome: TestOutcome, *, absent: str = "",
               causes: tuple[str, ...] = ()) -> ExerciseResult:
        test = TestResult(f"test_{exercise}.py::test_it", outcome, 1.0 if outcome == "passed" else 0.0, 1.0, "",
                          causes=causes)
        return ExerciseResult(exercise, test.points, 1.0, () if absent else (test,), absent=absent)

    done, failing = TestOutcome.PASSED, TestOutcome.FAILED
    known = {"attention": result("attention", done), "multi_head_attention": result("multi_head_attention", failing)}
    assert to_check("masking", ["01-attention.ipynb"], known) == ["attention", "masking", "multi_head_attention"]
    known["multi_head_attention"] = result("multi_head_attention", failing, absent="not in this submission")
    assert to_check("masking", ["attention.py"], known) == ["attention", "masking"]
    known["multi_head_attention"] = result("multi_head_attention", failing, causes=("unwritten",))
    assert to_check("masking", ["attention.py"], known) == ["attention", "masking"]
    assert to_check("masking", [], known) == ["masking"]
    assert to_check(None, [], {}) == list(EXERCISE_IDS)
