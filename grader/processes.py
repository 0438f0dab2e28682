"""`processes` finds and kills process trees through /proc; standard library only.

Used on both sides of the boundary: by the trusted side to kill a sandbox, and by the zygote
inside it to kill what one submission's workers left running before the next submission starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def die_with_parent(signum: int) -> None:
    """Have the kernel send us `signum` when the thread that started us dies."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def become_subreaper() -> float | None:
    """Make orphans of our descendants our children; returns since when, in clock ticks since boot."""
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    with open("/proc/uptime") as uptime:
        return float(uptime.read().split()[0]) * os.sysconf("SC_CLK_TCK") - 1


def children_map() -> dict[int, list[int]]:
    """Parent pid -> living child pids, for every process this process can see."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def descendants(root: int, children: dict[int, list[int]]) -> list[int]:
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_all(pids: list[int]) -> None:
    """SIGKILL each pid, then reap those that are our children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] != b"Z"


def start_time(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def _stat(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []
