"""A root grader's Python anywhere: a venv in /tmp grades at full strength; one uid 65534 cannot reach is refused.

bubblewrap gives the sandbox a tmpfs of its own on /tmp, which would hide a venv there; and every
tier runs a root grader's submissions as uid 65534, which cannot start a Python under a folder
closed to others (/root in most images). Each is rehearsed with a real venv (`--system-site-packages`
keeps torch and the kit's editable install without installing anything) in a folder of /tmp that
the tests' own temporary folders (0700, under /tmp/pytest-of-root) would not be.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.host.bubblewrap import bwrap_problem

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid 65534 runs the submissions of a root grader only")
needs_bubblewrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no bubblewrap here: {bwrap_problem()}")


def _venv(folder: Path) -> Path:
    """A venv in `folder` whose Python imports the grader and torch from the base installation; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    check = "import grader, importlib.util; assert importlib.util.find_spec('torch')"
    found = subprocess.run([str(python), "-c", check], cwd="/", capture_output=True, text=True)
    assert found.returncode == 0, f"the venv cannot import the grader: {found.stderr[-2000:]}"
    return python


@pytest.fixture(scope="module")
def in_tmp() -> Iterator[Path]:
    """A venv under /tmp, in a folder others may cross, as a CI job or an instructor would make it."""
    top = Path(tempfile.mkdtemp(prefix="kit-venv-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield _venv(top / "venv")
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def locked() -> Iterator[tuple[Path, Path]]:
    """A venv under a folder only root may enter (mode 0700), and that folder."""
    top = Path(tempfile.mkdtemp(prefix="kit-venv-", dir="/tmp"))
    top.chmod(0o755)
    closed = top / "locked"
    closed.mkdir(mode=0o700)
    try:
        yield _venv(closed / "venv"), closed
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _grader(python: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m grader ARGS` from `cwd`, with the kit's tests' environment but no PYTHONPATH: the venv's own."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment.update({"OMP_NUM_THREADS": "1", "NO_COLOR": "1", "COLUMNS": "160", **(env or {})})
    return subprocess.run([str(python), "-m", "grader", *args], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)


@needs_bubblewrap
def test_a_venv_in_tmp_grades_at_the_bubblewrap_tier(in_tmp, tmp_path):
    report = tmp_path / "report.json"
    run = _grader(in_tmp, "check", "attention", "--submission", str(REPO / "solutions"), "--json", str(report),
                  cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    graded = json.loads(report.read_text())
    assert (graded["sandbox"], graded["score"], graded["max_score"]) == ("bubblewrap", 10, 10), graded
    assert not graded.get("warnings"), graded["warnings"]


def test_a_venv_in_tmp_grades_at_the_user_tier(in_tmp, tmp_path, failing_bwrap):
    """No namespaces, so no tmpfs over /tmp: the venv is where it is, and the user tier reaches it."""
    report = tmp_path / "report.json"
    run = _grader(in_tmp, "check", "attention", "--submission", str(REPO / "solutions"), "--json", str(report),
                  cwd=tmp_path, env={"GRADER_BWRAP": str(failing_bwrap)})
    assert run.returncode == 0, run.stderr[-2000:]
    graded = json.loads(report.read_text())
    assert (graded["sandbox"], graded["score"]) == ("user", 10), graded
    assert in_tmp.exists()


# Run by the venv's Python: one sandbox, two submissions, the clean-up between them as `grader batch` does it.
RECYCLE = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path
    import torch
    from grader.host.failures import SubmissionFailure
    from grader.host.limits import Limits
    from grader.host.sandbox import Sandbox
    from grader.host.session import GradingSession
    from grader.intake.submission import load

    sandbox = Sandbox(device="cpu", limits=Limits(), tier="bubblewrap")
    said = {}
    try:
        for name in sys.argv[1:]:
            loaded = load(Path(name))
            session = GradingSession.around(Path(name), loaded, sandbox, sandbox.connect(loaded), device="cpu")
            try:
                session.impl().attention.attention(torch.zeros(1, 2, 2), torch.zeros(1, 2, 2), torch.zeros(1, 2, 2))
            except SubmissionFailure as failure:
                said[name] = str(failure)
            session.close()
            said[name + " zygote"] = sandbox._zygote.pid
        sandbox.recycle()
        said["tmp"] = sorted(os.listdir(f"/proc/{sandbox._zygote.pid}/root/tmp"))
    finally:
        sandbox.close()
    print(json.dumps(said))
''')


@needs_bubblewrap
def test_the_clean_up_between_submissions_keeps_a_venv_in_tmp_and_nothing_else(in_tmp, tmp_path):
    venv = in_tmp.parent
    top = venv.relative_to("/tmp").parts[0]
    writer, looker = tmp_path / "writer", tmp_path / "looker"
    writer.mkdir()
    looker.mkdir()
    (writer / "attention.py").write_text(textwrap.dedent(f'''
        import os
        def attention(query, key, value, dropout=None, mask=None):
            done = []
            for path in ("/tmp/left", "/dev/shm/left", "/tmp/{top}/left", "{venv}/left"):
                try:
                    open(path, "w").close()
                    done.append("wrote " + path)
                except OSError as error:
                    done.append(f"{{path}}: {{error.strerror}}")
            for name, move in (("rename", lambda: os.rename("/tmp/{top}", "/tmp/moved")),
                               ("rmdir", lambda: os.rmdir("/tmp/{top}")),
                               ("chmod", lambda: os.chmod("/tmp/{top}", 0o777))):
                try:
                    move()
                    done.append("did " + name)
                except OSError as error:
                    done.append(f"{{name}}: {{error.strerror}}")
            raise ValueError(" | ".join(done))
    '''))
    (looker / "attention.py").write_text(textwrap.dedent('''
        import os
        def attention(query, key, value, dropout=None, mask=None):
            raise ValueError(repr((sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))))
    '''))
    run = subprocess.run([str(in_tmp), "-c", RECYCLE, str(writer), str(looker)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    said = json.loads(run.stdout.strip().splitlines()[-1])
    wrote = said[str(writer)]
    assert "wrote /tmp/left" in wrote and "wrote /dev/shm/left" in wrote, wrote  # scratch stays scratch
    for refused in (f"/tmp/{top}/left: Read-only file system", f"{venv}/left: Read-only file system",
                    "rename: Device or resource busy", "rmdir: Device or resource busy",
                    "chmod: Read-only file system"):
        assert refused in wrote, wrote
    # The next submission, in the same sandbox (the same zygote), finds only the mount of the venv.
    assert repr(([top], [])) in said[str(looker)], said[str(looker)]
    assert said[str(writer) + " zygote"] == said[str(looker) + " zygote"], said
    assert said["tmp"] == [top], said
    assert in_tmp.exists() and not (venv / "left").exists()


@pytest.mark.parametrize("command", [
    ("check", "attention"), ("check", "attention", "--suite", "public"), ("batch", "CLASS", "--out", "OUT"),
    ("watch", "attention", "--max-runs", "1"),
], ids=["check", "check-public", "batch", "watch"])
def test_a_python_uid_65534_cannot_reach_is_refused_with_the_chmod_that_fixes_it(locked, tmp_path, command):
    python, closed = locked
    (tmp_path / "class" / "alice").mkdir(parents=True)
    shutil.copyfile(REPO / "solutions" / "attention.py", tmp_path / "class" / "alice" / "attention.py")
    args = [{"CLASS": str(tmp_path / "class"), "OUT": str(tmp_path / "out")}.get(a, a) for a in command]
    if args[0] in ("check", "watch"):
        args += ["--submission", str(REPO / "solutions")]
    run = _grader(python, *args, cwd=tmp_path)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("grader: error: uid 65534") and f"chmod o+x {closed} " in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_a_tmpdir_uid_65534_cannot_reach_is_refused_with_the_chmod_that_fixes_it(in_tmp, tmp_path):
    closed = Path(tempfile.mkdtemp(prefix="kit-closed-tmp-", dir="/tmp"))  # 0700
    try:
        run = _grader(in_tmp, "check", "attention", "--submission", str(REPO / "solutions"), cwd=tmp_path,
                      env={"TMPDIR": str(closed)})
    finally:
        shutil.rmtree(closed, ignore_errors=True)
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and f"TMPDIR) at {closed}: chmod o+x {closed} " in lines[0], run.stderr


def test_the_fix_can_be_pasted_and_names_the_bits_that_apply_to_uid_65534(tmp_path):
    """A folder whose group is 65534's (nogroup) is crossed by its group bits, not others': the fix says g+x; a
    name with a space is quoted, so that the line can be pasted into a shell as it is."""
    top = Path(tempfile.mkdtemp(prefix="kit-venv-", dir="/tmp"))
    top.chmod(0o755)
    closed = top / "lab work"
    closed.mkdir(mode=0o705)
    os.chown(closed, 0, NOBODY)
    try:
        python = _venv(closed / "venv")
        refused = _grader(python, "check", "attention", "--submission", str(REPO / "solutions"), cwd=tmp_path)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, (refused.returncode, refused.stderr[-2000:])
        fix = lines[0].partition(": chmod ")[2].partition(" lets it")[0]
        assert fix == f"g+x {shlex.quote(str(closed))}", lines[0]
        subprocess.run(f"chmod {fix}", shell=True, check=True)
        graded = _grader(python, "check", "attention", "--submission", str(REPO / "solutions"), cwd=tmp_path)
        assert graded.returncode == 0, graded.stderr[-2000:]
    finally:
        shutil.rmtree(top, ignore_errors=True)
