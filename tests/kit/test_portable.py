"""The portable path (Windows, macOS), taken here on Linux with GRADER_WORKERS=spawn, as a student takes it.

Each check runs in a student release (`grader release`), with `python -m grader` from its folder, as on a
laptop: workers are spawned, not forked from a zygote; they talk over their standard input and output; no
seccomp, Landlock or rlimits; the `none` tier, said in every report. The reference gets full marks on the
public suite, the stubs 0, a known mistake loses points with its message, a segmentation fault is contained
and the next exercise is graded. What the portable path imports at module level is checked against what
Windows lacks: the OS jobs of .github/workflows/portable.yml run these tests where Actions runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from grader.judge import variants
from grader.release import build

REPO = Path(__file__).resolve().parents[2]
SPAWN = {"GRADER_WORKERS": "spawn", "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "COLUMNS": "160"}
TIMEOUT_S = 300

# What Windows does not have, imported by the kit's own code (third-party code chooses by platform itself).
LINUX_ONLY = ("resource", "fcntl", "termios", "pwd", "grp", "pty", "tty", "seccomp", "landlock", "pyseccomp")
GUARD = textwrap.dedent(f"""
    import builtins
    _import = builtins.__import__
    def _guarded(name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {{}}).get("__name__") or ""
        if level == 0 and name.partition(".")[0] in {LINUX_ONLY!r} and importer.partition(".")[0] == "grader":
            raise ImportError(f"{{importer}} imports {{name}}, which Windows does not have")
        return _import(name, globals, locals, fromlist, level)
    builtins.__import__ = _guarded
""")
# The modules of the student's loop on the portable path: the command line, a check, watch, %grader, the worker.
PORTABLE_MODULES = ("grader.cli.main", "grader.host.portable", "grader.host.session", "grader.grade.runner",
                    "grader.judge.plugin", "grader.student.watch", "grader.student.jupyter", "grader.student.show",
                    "grader.inside.portable", "grader.inside.worker", "grader.inside.shared.protocol")


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("portable") / "student"
    build(out)
    return out


def grader_in(release: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """`python -m grader ARGS` in the release's folder, with GRADER_WORKERS=spawn."""
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=release, capture_output=True, text=True,
                          env={**os.environ, **SPAWN, "GRADER_STATE_DIR": str(release / ".grader"), **(env or {})},
                          timeout=timeout, stdin=subprocess.DEVNULL)


def check(release: Path, submission: Path, report: Path, *exercises: str) -> dict[str, Any]:
    done = grader_in(release, "check", *exercises, "--submission", str(submission), "--json", str(report))
    assert done.returncode == 0, f"exit {done.returncode}:\n{(done.stderr or done.stdout)[-2000:]}"
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return json.loads(report.read_text(encoding="utf-8"))


def scores(report: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {e["id"]: (e["score"], e["max_score"]) for e in report["exercises"]}


def solved(tmp_path: Path, **replaced: str) -> Path:
    """The reference's exercise files, some replaced by the sources given."""
    folder = tmp_path / "exercises"
    folder.mkdir()
    for solution in (REPO / "solutions").glob("*.py"):
        shutil.copyfile(solution, folder / solution.name)
    for exercise, source in replaced.items():
        (folder / f"{exercise}.py").write_text(source, encoding="utf-8")
    return folder


def test_the_reference_gets_full_marks_and_the_stubs_zero_at_the_none_tier_it_names(release: Path,
                                                                                    tmp_path: Path):
    reference = check(release, solved(tmp_path), tmp_path / "reference.json")
    assert reference["suite"] == "public"
    assert all(score == top > 0 for score, top in scores(reference).values()), scores(reference)
    stubs = check(release, release / "exercises", tmp_path / "stubs.json")
    assert stubs["score"] == 0, scores(stubs)
    for report in (reference, stubs):
        assert report["sandbox"] == "none", report["sandbox"]
        said = " ".join(report["warnings"])
        assert "GRADER_WORKERS=spawn" in said and "unconfined" in said, report["warnings"]


def test_a_known_mistake_loses_points_with_its_message(release: Path, tmp_path: Path):
    mistake = next(v for v in variants.mistakes("attention") if v.name == "mask_ignored")
    report = check(release, solved(tmp_path, attention=mistake.source), tmp_path / "report.json", "attention")
    attention = report["exercises"][0]
    assert attention["score"] < attention["max_score"], scores(report)
    messages = [t["message"] for t in attention["tests"] if t["points"] < t["max_points"]]
    # A student's install has no catalogue of mistakes, so the test's hint says it; where the kit is installed too
    # (this machine), the diagnosis does: both name the fix.
    assert any("mask == 0" in message and "-inf before the softmax" in message for message in messages), messages


def test_a_segfault_costs_its_exercise_only_and_the_next_is_graded(release: Path, tmp_path: Path):
    crashing = (REPO / "solutions" / "positional_encoding.py").read_text(encoding="utf-8") + textwrap.dedent("""

        import ctypes

        _forward = PositionalEncoding.forward


        def _crash(self, x):
            ctypes.string_at(0)


        PositionalEncoding.forward = _crash
    """)
    report = check(release, solved(tmp_path, positional_encoding=crashing), tmp_path / "report.json",
                   "positional_encoding", "sublayers")
    graded = scores(report)
    assert graded["positional_encoding"][0] < graded["positional_encoding"][1], graded
    assert graded["sublayers"][0] == graded["sublayers"][1] > 0, graded
    lost = [t["message"] for t in report["exercises"][0]["tests"] if t["points"] < t["max_points"]]
    assert any("the worker crashed with SIG" in message for message in lost), lost  # SIGBUS on some Macs


# The reference's attention, which also leaves two processes behind at each call, their command lines carrying
# MARKER: a sleeper after a double fork (setsid, then the middle process exits: no tree leads from the worker to
# it), and a hopper, which forks and exits every 10 ms, so that it is always an orphan under a pid it just took.
ESCAPING = textwrap.dedent("""

    import os as _os
    import sys as _sys

    _attention = attention
    _HOP = "import os, time\\nfor _ in range(6000):\\n    if os.fork():\\n        os._exit(0)\\n    time.sleep(0.01)"


    def attention(query, key, value, dropout=None, mask=None):
        if _os.fork() == 0:
            _os.setsid()
            if _os.fork() == 0:
                _os.execv(_sys.executable, [_sys.executable, "-c", "import time; time.sleep(120)", MARKER])
            _os._exit(0)
        _os.wait()
        if _os.fork() == 0:
            _os.execv(_sys.executable, [_sys.executable, "-c", _HOP, MARKER])
        return _attention(query, key, value, dropout=dropout, mask=mask)
""")


def marked(marker: str) -> list[int]:
    """Pids of the processes whose command line carries `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="only Linux has a subreaper: elsewhere what leaves a worker's tree is out of reach")
def test_what_escapes_a_workers_tree_is_killed_before_the_grader_exits(release: Path, tmp_path: Path):
    """A process that left the worker's tree would outlive the grader, and could rewrite its report once it exits:
    the grader is a subreaper, so it comes back to it and is killed with the worker, a hopper too."""
    marker = f"kit-portable-escapee-{secrets.token_hex(4)}"
    source = (REPO / "solutions" / "attention.py").read_text(encoding="utf-8") + ESCAPING.replace("MARKER",
                                                                                                 repr(marker))
    try:
        report = check(release, solved(tmp_path, attention=source), tmp_path / "report.json", "attention")
        left = marked(marker)
    finally:  # again and again: a hopper is under a new pid every 10 ms
        for _ in range(100):
            if not (pids := marked(marker)):
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
    assert not left, f"{len(left)} processes the submission started outlived grading"
    assert scores(report)["attention"][0] == scores(report)["attention"][1], scores(report)


THIEF = textwrap.dedent("""
    import os
    from pathlib import Path


    def attention(query, key, value, dropout=None, mask=None):
        try:
            seen = Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(errors="replace")
        except OSError as error:
            seen = f"the grader's environment could not be read: {error}"
        raise RuntimeError(seen[-1500:])
""")


def test_a_worker_of_the_graders_own_uid_cannot_read_its_environment(release: Path, tmp_path: Path,
                                                                     as_nobody: tuple[str, ...]):
    """Not root, the grader spawns workers of its own uid, which could read its environment (tokens) through /proc;
    undumpable, as at the zygote's `none` tier, it is closed to them. The grader runs as uid 65534 here."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("run as root on Linux with setpriv: the grader is run as another user")
    secret = f"kit-portable-secret-{secrets.token_hex(8)}"
    work = Path(tempfile.mkdtemp(prefix="kit-portable-nobody-"))  # pytest's own folders are closed to uid 65534
    try:
        student = work / "student"
        shutil.copytree(release, student, ignore=shutil.ignore_patterns(".grader"))
        submission = solved(work, attention=THIEF)
        for path in [work, *work.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)
        done = subprocess.run([*as_nobody, sys.executable, "-m", "grader", "check", "attention", "--submission",
                               str(submission), "--json", str(work / "report.json")], cwd=student,
                              capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
                              env={**os.environ, **SPAWN, "GRADER_STATE_DIR": str(work / ".grader"),
                                   "HOME": str(work), "KIT_GRADER_SECRET": secret})
        report = (work / "report.json").read_text(encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert done.returncode == 0, (done.stderr or done.stdout)[-2000:]
    assert "could not be read" in report, report[-2000:]
    assert secret not in done.stdout + done.stderr + report, "the grader's environment reached the submission"


# A worker that says hello, never answers, and leaves behind a process that keeps its reply pipe (its stdout) open
# until the file argv[2] exists; that process writes its pid to argv[1].
HOLDING = textwrap.dedent("""
    import json, os, struct, sys, time

    hello = json.dumps({"id": 0, "ok": True, "value": {}}).encode()
    os.write(1, struct.pack("<4sQQ", b"GRDR", len(hello), 0) + hello)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(sys.argv[1] + ".part", "w") as pid:
                pid.write(str(os.getpid()))
            os.rename(sys.argv[1] + ".part", sys.argv[1])
            while not os.path.exists(sys.argv[2]):
                time.sleep(0.02)
        os._exit(0)
    time.sleep(60)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="the worker standing in forks")
def test_a_pipe_that_an_escaped_process_holds_is_not_closed_under_the_reader(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """Where what escapes a worker is out of reach (no subreaper: macOS, Windows), it can keep the worker's reply
    pipe open after kill(), the reader thread blocked in a read on it. Closed under that read, the descriptor's
    number would go to the next worker's pipe, whose hello the old reader then takes: the next worker "could not
    start", the grader's failure, caused by the submission. The reader closes it once its read ends."""
    from grader.host import spawned, trees
    from grader.host.limits import Limits, WorkerTimeout

    monkeypatch.setattr(trees, "_subreaper_since", None)  # as where there is no subreaper
    pid_file, go = tmp_path / "escapee.pid", tmp_path / "go"
    process = subprocess.Popen([sys.executable, "-c", HOLDING, str(pid_file), str(go)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, start_new_session=True)
    assert process.stdout is not None
    worker = spawned.PortableWorker(process, Limits(), warm=False)

    def pipe_at(fd: int) -> int | None:
        try:
            return os.fstat(fd).st_ino
        except OSError:
            return None

    try:
        worker.wait_ready()
        fd = process.stdout.fileno()
        pipe = pipe_at(fd)
        with pytest.raises(WorkerTimeout):
            worker.exchange({"op": "import", "name": "attention"}, {}, timeout_s=0.5)
        assert pipe_at(fd) == pipe, "the reply pipe was closed while the reader was still reading it"
    finally:
        worker.kill()
        deadline = time.monotonic() + 10
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(OSError, ValueError):  # alive until `go` exists: its pid is still its own
            escapee = int(pid_file.read_text())
            os.kill(escapee, signal.SIGKILL)
            os.waitpid(escapee, 0)  # ours to reap if this process is a subreaper (other tests make it one)
        go.touch()  # should it not have been killed
    deadline = time.monotonic() + 10
    while not process.stdout.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.stdout.closed, "the reader did not close the reply pipe once the process holding it was gone"


def test_batch_and_the_hidden_suite_are_refused_in_one_line(release: Path, tmp_path: Path):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    batch = grader_in(release, "batch", str(tmp_path / "class"), "--out", str(tmp_path / "out"))
    assert batch.returncode == 2 and batch.stderr.count("\n") == 1, batch.stderr
    assert "GRADER_WORKERS=spawn" in batch.stderr and not (tmp_path / "out").exists(), batch.stderr
    # In the kit's own checkout the hidden tests and solutions are there to be read: refused at the none tier.
    hidden = subprocess.run([sys.executable, "-m", "grader", "check", "attention", "--suite", "hidden"], cwd=REPO,
                            capture_output=True, text=True, env={**os.environ, **SPAWN}, timeout=TIMEOUT_S)
    assert hidden.returncode == 2 and hidden.stderr.startswith("grader: error: refused"), hidden.stderr
    assert hidden.stderr.count("\n") == 1, hidden.stderr


def test_watch_checks_as_grader_check_does(release: Path, tmp_path: Path):
    submission = solved(tmp_path)
    done = grader_in(release, "watch", "attention", "--submission", str(submission), "--max-runs", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "attention" in done.stdout and "10/10" in done.stdout, done.stdout


def test_a_misspelt_grader_workers_is_one_line(release: Path):
    done = grader_in(release, "check", "attention", env={"GRADER_WORKERS": "spwan"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "GRADER_WORKERS='spwan'" in done.stderr and "auto, fork or spawn" in done.stderr, done.stderr


def test_the_portable_path_imports_nothing_windows_lacks():
    """Each module of the student's loop imported with the Linux-only modules refused to the kit's code, in a
    process of its own; and a full check run so, which catches imports inside functions on the path too."""
    imports = GUARD + "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in PORTABLE_MODULES)
    done = subprocess.run([sys.executable, "-c", imports], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **SPAWN}, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    run = GUARD + "import runpy, sys\nsys.argv = ['grader', 'check', 'attention', '--submission', 'solutions']\n" \
                  "runpy.run_module('grader', run_name='__main__', alter_sys=True)\n"
    graded = subprocess.run([sys.executable, "-c", run], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, **SPAWN, "GRADER_SANDBOX": "none"}, timeout=TIMEOUT_S)
    assert graded.returncode == 0 and "10/10" in graded.stdout, (graded.stderr or graded.stdout)[-2000:]


def test_the_guard_itself_refuses_a_linux_only_import():
    """The check above can fail: a kit module that imports `resource` at module level is refused."""
    probe = GUARD + "import types, sys\nmodule = types.ModuleType('grader.probe')\n" \
                    "exec('import resource', module.__dict__)\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Windows does not have" in done.stderr, done.stderr


WORKFLOW = REPO / ".github" / "workflows" / "portable.yml"


def test_the_os_workflow_runs_these_tests_on_windows_and_macos():
    """portable.yml's jobs: windows-latest and macos-latest, the CPU torch pinned, and a test step that runs this
    very file with pytest (actionlint checks the rest, in test_release). This file's tests are what the step runs:
    running the step here as well would only run them twice."""
    import yaml

    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    job = workflow["jobs"]["student-loop"]
    matrix = {entry["os"]: entry["torch-index"] for entry in job["strategy"]["matrix"]["include"]}
    assert set(matrix) == {"windows-latest", "macos-latest"}, matrix
    assert matrix["windows-latest"] == "https://download.pytorch.org/whl/cpu", matrix
    assert job["env"]["GRADER_WORKERS"] == "spawn" and job["env"]["OMP_NUM_THREADS"] == "1", job["env"]
    steps = {step.get("name"): step for step in job["steps"]}
    assert "torch==2.13.0" in steps["Install the CPU build of torch, then the kit"]["run"]
    command = shlex.split(steps["The portable kit tests"]["run"])
    assert command[:3] == ["python", "-m", "pytest"], command
    assert [REPO / arg for arg in command[3:] if not arg.startswith("-")] == [Path(__file__)], command
