"""Isolation: kills the zygote (the worker's parent) with SIGKILL, then every process it can signal.

A killed zygote takes the sandbox with it: the grader must start a fresh one for the next call and
the next submission, which must not notice. The message lists what it killed (`killed=[...]`).
Never harms the host: it signals only its parent (the zygote), and kill(-1) only when every process it
can see is the sandbox's own (a PID namespace), never where it could reach processes outside.
"""

import os
import signal

import torch

SANDBOX_SIGNS = (b"gradeworker", b"bwrap", b"KIT_ISOLATION_MARKER")


def _contained():
    """True when every process in sight (but ourselves) is the sandbox's: then kill(-1) cannot leave it."""
    me = os.getpid()
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    if len(pids) > 1000:
        return False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone while we looked
        except OSError:
            return False
        if not any(sign in command for sign in SANDBOX_SIGNS):
            return False
    return True


def _is_the_zygote(pid):
    """Whether `pid` is the grader's zygote (or a process we may not even read, hence not signal)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return any(sign in cmdline.read() for sign in SANDBOX_SIGNS)
    except OSError:
        return True


def attention(query, key, value, dropout=None, mask=None):
    killed = []
    parent = os.getppid()
    if parent > 1 and _is_the_zygote(parent):
        try:
            os.kill(parent, signal.SIGKILL)
            killed.append("zygote")
        except OSError:
            pass
    if _contained():
        try:
            os.kill(-1, signal.SIGKILL)
            killed.append("everything")
        except OSError:
            pass
    raise RuntimeError(f"killed={killed}")
