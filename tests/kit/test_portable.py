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
import threading
import time
from collections.abc import Iterator
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


def grader_in(release: Path, *args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
              prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m grader ARGS` in the release's folder, with GRADER_WORKERS=spawn (run by `prefix`, if given)."""
    return subprocess.run([*prefix, sys.executable, "-m", "grader", *args], cwd=release, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, **SPAWN, "GRADER_STATE_DIR": str(release / ".grader"), **(env or {})})


def check(release: Path, submission: Path, report: Path, *exercises: str, env: dict[str, str] | None = None,
          prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    done = grader_in(release, "check", *exercises, "--submission", str(submission), "--json", str(report), env=env,
                     prefix=prefix)
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux has a subreaper")
def test_a_child_being_started_is_never_listed_as_an_escaped_orphan():
    """A worker's watcher lists this process's children it did not start as escaped from its tree, and kills them
    with it. A worker being started, not yet adopted, must not be among them (a worker started ahead once was, and
    a test's hoarder was killed and reaped that way: "exited with code 0" before its hello)."""
    from grader.host import trees

    trees.become_subreaper()
    listed: list[int] = []
    lister = threading.Thread(target=lambda: listed.extend(p.pid for p in trees.orphans(since=0)))
    with trees.starting():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            lister.start()
            lister.join(0.5)  # a listing now, unlocked, would find the child
            trees.adopt(child.pid)
        except BaseException:
            child.kill()
            raise
    try:
        lister.join(10)
        assert not lister.is_alive()
        assert child.pid not in listed
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux has a subreaper")
def test_a_child_in_the_graders_own_session_is_never_listed_as_an_escaped_orphan():
    """Every worker runs in a session of its own, and a process can only stay in its parent's session or start one:
    a child in the grader's session that it did not adopt (a batch slot, a command a test runs) is its own, never a
    worker's escapee, and is not killed with a worker's tree (xdist saw warm slots killed that way). One in another
    session, not adopted, is listed: that is what an escapee looks like."""
    from grader.host import trees

    trees.become_subreaper()
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    ours, elsewhere = subprocess.Popen(sleeper), subprocess.Popen(sleeper, start_new_session=True)
    try:
        listed = [p.pid for p in trees.orphans(since=0)]
        assert ours.pid not in listed and elsewhere.pid in listed, (ours.pid, elsewhere.pid, listed)
    finally:
        for child in (ours, elsewhere):
            child.kill()
            child.wait()


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


# What a submission can hold that no process's resident size shows, each loaded at import: MIB MiB written to a file in
# a tmpfs (PATH), kept; or the control, the same MiB held in the process itself. A hoard is over the limit on its own.
HOARD = textwrap.dedent("""

    def _hoard(path, mib):
        chunk = b"\\1" * 2**20
        with open(path, "wb") as hoard:
            for _ in range(mib):
                hoard.write(chunk)


    _hoard(PATH, MIB)
""")
HOARD_IN_PROCESS = textwrap.dedent("""

    _HOARD = [bytearray(b"\\1" * 2**20) for _ in range(MIB)]
""")
# The reference's sublayers, which also leave files and folders in every shared folder, a folder closed to its owner
# among them: named after TOKEN, so that the test finds them.
LITTER = textwrap.dedent("""

    import os as _os


    def _litter(token):
        for shared in ("/tmp", "/var/tmp", "/dev/shm"):
            top = _os.path.join(shared, f"kit-litter-{token}")
            with open(top + ".txt", "w") as note:
                note.write("left behind")
            _os.makedirs(_os.path.join(top, "deep", "closed"))
            with open(_os.path.join(top, "deep", "closed", "file"), "w") as note:
                note.write("left behind")
            _os.chmod(_os.path.join(top, "deep", "closed"), 0)
            _os.chmod(top, 0)


    _litter(TOKEN)
""")
HOARD_MIB = 1024
MEMORY = {"GRADER_MEMORY_LIMIT_MB": "768"}  # the least GRADER_SCRATCH_MB's default lets the limit be: fast to hoard
SHARED_FOLDERS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def hoarding(source: str, path: str, mib: int = HOARD_MIB) -> str:
    return source + HOARD.replace("PATH", repr(path)).replace("MIB", str(mib))


def littering(token: str) -> str:
    return (REPO / "solutions" / "sublayers.py").read_text(encoding="utf-8") + LITTER.replace("TOKEN", repr(token))


def left_behind(token: str, *folders: Path) -> list[str]:
    """What carries `token` at the top of `folders`."""
    return sorted(str(entry) for folder in folders for entry in folder.glob(f"*{token}*"))


def remove_left(token: str, *folders: Path) -> None:
    for name in left_behind(token, *folders):
        with contextlib.suppress(OSError):
            if os.path.isdir(name) and not os.path.islink(name):
                subprocess.run(["rm", "-rf", "--", name], check=False, capture_output=True)  # folders closed to all
            else:
                os.unlink(name)


def stopped(report: dict[str, Any], exercise: str) -> list[str]:
    """The messages of `exercise`'s tests that failed."""
    graded = next(e for e in report["exercises"] if e["id"] == exercise)
    return [t["message"] for t in graded["tests"] if t["points"] < t["max_points"]]


@pytest.fixture(scope="module")
def graded_as_nobody(release: Path, as_nobody: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """One `grader check` run by uid 65534, whose workers are then its own uid: attention reads the grader's
    environment (THIEF), head_attention hoards in /dev/shm, sublayers litters the shared folders."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("run as root on Linux with setpriv: the grader is run as another user")
    secret, token = f"kit-portable-secret-{secrets.token_hex(8)}", secrets.token_hex(6)
    hoard = f"/dev/shm/kit-hoard-{token}"
    work = Path(tempfile.mkdtemp(prefix="kit-portable-nobody-"))  # pytest's own folders are closed to uid 65534
    try:
        student = work / "student"
        shutil.copytree(release, student, ignore=shutil.ignore_patterns(".grader"))
        head = (REPO / "solutions" / "head_attention.py").read_text(encoding="utf-8")
        submission = solved(work, attention=THIEF, head_attention=hoarding(head, hoard), sublayers=littering(token))
        for path in [work, *work.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o666)
        done = grader_in(student, "check", "attention", "head_attention", "sublayers", "--submission",
                         str(submission), "--json", str(work / "report.json"), prefix=as_nobody,
                         env={**MEMORY, "GRADER_STATE_DIR": str(work / ".grader"), "HOME": str(work),
                              "KIT_GRADER_SECRET": secret})
        report = (work / "report.json").read_text(encoding="utf-8") if done.returncode == 0 else "{}"
        yield {"done": done, "report": report, "secret": secret, "left": left_behind(token, *SHARED_FOLDERS)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
        remove_left(token, *SHARED_FOLDERS)


def test_a_worker_of_the_graders_own_uid_cannot_read_its_environment(graded_as_nobody: dict[str, Any]):
    """Not root, the grader spawns workers of its own uid, which could read its environment (tokens) through /proc;
    undumpable, as at the zygote's `none` tier, it is closed to them. The grader runs as uid 65534 here."""
    done, report = graded_as_nobody["done"], graded_as_nobody["report"]
    assert done.returncode == 0, (done.stderr or done.stdout)[-2000:]
    assert "could not be read" in report, report[-2000:]
    assert graded_as_nobody["secret"] not in done.stdout + done.stderr + report, \
        "the grader's environment reached the submission"


def test_a_worker_of_the_graders_own_uid_is_bounded_and_cleaned_up_after_as_uid_65534_is(
        graded_as_nobody: dict[str, Any]):
    """Where the worker's uid is the grader's own, ownership cannot tell its files from the user's: what it created
    since grading started counts, and is removed at the end, with what it left elsewhere in the shared folders."""
    done = graded_as_nobody["done"]
    assert done.returncode == 0, (done.stderr or done.stdout)[-2000:]
    report = json.loads(graded_as_nobody["report"])
    graded = scores(report)
    assert graded["head_attention"][0] == 0, graded
    assert any("over the 768 MiB memory limit" in message for message in stopped(report, "head_attention")), \
        stopped(report, "head_attention")
    # Litter is no mistake: it is only removed.
    assert graded["sublayers"][0] == graded["sublayers"][1], (graded, stopped(report, "sublayers"))
    assert not graded_as_nobody["left"], f"left behind after grading: {graded_as_nobody['left']}"


# A tmpfs other than /dev/shm that the worker can write: mounted on /var/tmp in a mount namespace of the grader's own,
# which goes (and the tmpfs with it) when the grader exits.
PRIVATE_TMPFS = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
                 'mount -t tmpfs -o mode=1777,size=4g kit-portable /var/tmp && exec "$@"', "sh")


@pytest.fixture(scope="module")
def hoarded(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Root grades, its workers uid 65534, with /var/tmp a tmpfs: attention hoards in /dev/shm, head_attention in
    /var/tmp, positional_encoding (the control) holds as much in its own process, sublayers litters /tmp and
    /dev/shm."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None \
            or subprocess.run([*PRIVATE_TMPFS, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("run as root on Linux with unshare: /var/tmp is made a tmpfs in a mount namespace of its own")
    token = secrets.token_hex(6)
    work = tmp_path_factory.mktemp("hoarded")
    attention, head, positional = ((REPO / "solutions" / f"{name}.py").read_text(encoding="utf-8")
                                   for name in ("attention", "head_attention", "positional_encoding"))
    submission = solved(work, attention=hoarding(attention, f"/dev/shm/kit-hoard-{token}"),
                        head_attention=hoarding(head, f"/var/tmp/kit-hoard-{token}"),
                        positional_encoding=positional + HOARD_IN_PROCESS.replace("MIB", str(HOARD_MIB)),
                        sublayers=littering(token))
    try:
        report = check(release, submission, work / "report.json", "attention", "head_attention",
                       "positional_encoding", "sublayers", env=MEMORY, prefix=PRIVATE_TMPFS)
        yield {"report": report, "left": left_behind(token, Path("/tmp"), Path("/dev/shm"))}
    finally:
        remove_left(token, Path("/tmp"), Path("/dev/shm"))


def test_memory_held_in_a_tmpfs_is_stopped_at_the_limit_and_gains_nothing(hoarded: dict[str, Any]):
    """Pages of a file in /dev/shm or another tmpfs are memory that no process's resident size shows: counted, a
    submission that holds its memory there is stopped at the limit, and scores no more of an exercise than the
    control, which holds as much in its own process."""
    report = hoarded["report"]
    share = {exercise: score / top for exercise, (score, top) in scores(report).items()}
    assert share["positional_encoding"] < 1, share  # the control: stopped, as every tier stops it
    for exercise in ("attention", "head_attention", "positional_encoding"):
        assert share[exercise] <= share["positional_encoding"], (exercise, share)
        lost = stopped(report, exercise)
        assert lost and all("over the 768 MiB memory limit" in message for message in lost), (exercise, lost)


def test_what_a_submission_leaves_in_the_shared_folders_is_gone_when_grading_ends(hoarded: dict[str, Any]):
    """/tmp, /var/tmp and /dev/shm outlive a grading: what a worker left there (the hoards of those stopped, the
    litter of one that ran to the end) is removed when it ends, as on the zygote's `user` tier. (/var/tmp is
    checked where the grader is uid 65534: here it is the grader's own tmpfs, gone with it.)"""
    assert not hoarded["left"], f"left behind after grading: {hoarded['left']}"
    graded = scores(hoarded["report"])
    assert graded["sublayers"][0] == graded["sublayers"][1], (graded, stopped(hoarded["report"], "sublayers"))


# A worker that says hello, then holds argv[2] MiB where argv[1] says, none of it in its own resident size, and waits.
HOARDER = textwrap.dedent("""
    import ctypes, json, mmap, os, struct, sys, time

    hello = json.dumps({"id": 0, "ok": True, "value": {}}).encode()
    os.write(1, struct.pack("<4sQQ", b"GRDR", len(hello), 0) + hello)
    place, size, path = sys.argv[1], int(sys.argv[2]) * 2**20, sys.argv[3]
    chunk, kept, SLICE = b"\\1" * 2**20, [], 32 * 2**20


    def fill(write):
        for _ in range(size // len(chunk)):
            write(chunk)


    if place == "file":
        with open(path, "wb") as hoard:
            fill(hoard.write)
    elif place == "closed":
        os.mkdir(path)
        with open(os.path.join(path, "hoard"), "wb") as hoard:
            fill(hoard.write)
        os.chmod(path, 0)
    elif place == "unlinked":
        hoard = open(path, "wb", buffering=0)
        os.unlink(path)
        fill(hoard.write)
        kept.append(hoard)
    elif place == "memfd":
        fd = os.memfd_create("hoard")
        fill(lambda data: os.write(fd, data))
        kept.append(fd)
    elif place == "mapped":
        with open(path, "wb+") as hoard:
            fill(hoard.write)
            hoard.flush()
            kept.append(mmap.mmap(hoard.fileno(), mmap.PAGESIZE))
        os.unlink(path)
    elif place == "shared":  # a slice per child: no process ever has much of it in its resident size
        shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        for start in range(0, size, SLICE):
            if os.fork() == 0:
                shared[start:start + SLICE] = chunk * (SLICE // len(chunk))
                os._exit(0)
            os.wait()
        kept.append(shared)
    elif place == "segment":  # a slice per attachment, for the same reason
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        segment = libc.shmget(0, ctypes.c_size_t(size), 0o1600)
        for start in range(0, size, SLICE):
            address = libc.shmat(segment, None, 0)
            ctypes.memset(address + start, 1, SLICE)
            libc.shmdt(ctypes.c_void_p(address))
    time.sleep(60)
""")
HIDING_PLACES = {
    "file": "a file in /dev/shm",
    "closed": "a file in a folder of /dev/shm closed to its owner, the grader's uid maybe",
    "unlinked": "a file in /dev/shm, unlinked but kept open",
    "memfd": "a memfd",
    "mapped": "a file in /dev/shm, mapped, closed and unlinked",
    "shared": "a shared anonymous mapping that a child filled",
    "segment": "a System V segment, detached",
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs, memfds and /proc are Linux's")
@pytest.mark.parametrize("own_uid", [False, True], ids=["uid 65534", "the grader's uid"])
@pytest.mark.parametrize("place", list(HIDING_PLACES))
def test_shared_memory_a_worker_holds_counts_toward_its_memory_limit(place: str, own_uid: bool, tmp_path: Path):
    """Each way of holding memory outside a process's resident size (HIDING_PLACES) is counted: 256 MiB there is
    over a 128 MiB limit, as a worker run by root (uid 65534) or by its own user (the grader's uid) alike."""
    from grader.host import shmem, spawned, trees
    from grader.host.limits import Limits, WorkerGone
    from grader.inside.shared.processes import SANDBOX_UID

    if not own_uid and os.geteuid() != 0:
        pytest.skip("only root runs workers as uid 65534")
    uid = None if own_uid else SANDBOX_UID
    path = f"/dev/shm/kit-hoarder-{secrets.token_hex(6)}"
    options: dict[str, Any] = {} if own_uid else {"user": SANDBOX_UID, "group": SANDBOX_UID, "extra_groups": []}
    segments = frozenset(number for number, *_ in shmem.segments())
    limits = Limits(memory_bytes=128 * 2**20)
    with trees.starting():  # as the grader starts its workers
        process = subprocess.Popen([sys.executable, "-c", HOARDER, place, "256", path], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                   start_new_session=True, cwd="/", **options)
        worker = spawned.PortableWorker(process, limits, warm=False,
                                        shared=shmem.SharedMemory.for_worker(uid, files=limits.inodes))
    try:
        worker.wait_ready()
        with pytest.raises(WorkerGone) as gone:
            worker.exchange({"op": "import", "name": "attention"}, {}, timeout_s=5)
        assert "over the 128 MiB memory limit" in str(gone.value), (HIDING_PLACES[place], str(gone.value))
    finally:
        worker.kill()
        with contextlib.suppress(OSError):
            if os.path.isdir(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path)
            else:
                os.unlink(path)
        shmem.remove_segments(uid=os.geteuid() if own_uid else SANDBOX_UID, keep=segments)


# Run as uid 65534: measures a HOARDER of its own uid that hoards in a folder it closes, once it is closed.
CLOSED_TO_THE_GRADER = textwrap.dedent("""
    import os, subprocess, sys, time
    import psutil
    from grader.host import shmem

    hoarder, path = sys.argv[1], sys.argv[2]
    shared = shmem.SharedMemory.for_worker(None, files=65536)
    process = subprocess.Popen([sys.executable, "-c", hoarder, "closed", "256", path], stdout=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (os.path.isdir(path) and os.stat(path).st_mode & 0o777 == 0):
        time.sleep(0.02)
    print(shared.held([psutil.Process(process.pid)]))
    process.kill()
""")


def test_a_folder_closed_to_a_grader_of_the_workers_uid_counts_by_what_its_tmpfs_grew(as_nobody: tuple[str, ...]):
    """A grader of the worker's own uid cannot read a folder the worker closed to their uid (root could): how much
    that tmpfs grew since grading started counts instead. The grader is uid 65534 here."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("run as root on Linux with setpriv: the grader is run as another user")
    path = f"/dev/shm/kit-hoarder-{secrets.token_hex(6)}"
    try:
        done = subprocess.run([*as_nobody, sys.executable, "-c", CLOSED_TO_THE_GRADER, HOARDER, path], cwd="/",
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
            shutil.rmtree(path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) >= 256 * 2**20, f"{int(done.stdout) / 2**20:.0f} MiB counted of the 256 MiB held"


def test_shared_memory_under_the_limit_is_no_reason_to_stop_a_worker():
    """The count is not a guess that stops the innocent: 32 MiB in /dev/shm under a 128 MiB limit is let be."""
    from grader.host import shmem, spawned
    from grader.host.limits import Limits, WorkerTimeout

    if not sys.platform.startswith("linux"):
        pytest.skip("tmpfs, memfds and /proc are Linux's")
    path = f"/dev/shm/kit-hoarder-{secrets.token_hex(6)}"
    process = subprocess.Popen([sys.executable, "-c", HOARDER, "file", "32", path], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, start_new_session=True)
    limits = Limits(memory_bytes=128 * 2**20)
    worker = spawned.PortableWorker(process, limits, warm=False,
                                    shared=shmem.SharedMemory.for_worker(None, files=limits.inodes))
    try:
        worker.wait_ready()
        with pytest.raises(WorkerTimeout):
            worker.exchange({"op": "import", "name": "attention"}, {}, timeout_s=0.5)
    finally:
        worker.kill()
        with contextlib.suppress(OSError):
            os.unlink(path)


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
