"""`trees` finds and kills process trees from the host's view (psutil), escaped orphans included.

Never from anything a sandbox reports or mounts. This process becomes a child subreaper, so that
even children that called setsid() come back to it to be killed.
"""

from __future__ import annotations

import contextlib
import time

import psutil

from grader.inside.shared import processes

_started_by_us: set[int] = set()
_subreaper_since: float | None = None  # when this process became a child subreaper (time.time())


def become_subreaper() -> None:
    """Make this process a child subreaper, once: orphans of the trees it starts are re-parented to it."""
    global _subreaper_since
    if _subreaper_since is None and processes.become_subreaper():
        _subreaper_since = time.time()


def adopt(pid: int) -> None:
    """`pid` is a child this process started itself (a forked grading process), never an escaped orphan."""
    _started_by_us.add(pid)


def kill_tree(root: int, *, spare: set[int] | frozenset[int] = frozenset()) -> bool:
    """SIGKILL `root` and every process below it but `spare`, including ones that escaped with setsid().

    Escaped processes whose parent died were re-parented to us (we are a child subreaper), so they
    show up as children of ours that we did not start, born after we became a subreaper. Returns
    whether none is left. psutil identifies a process by pid and start time, so a pid reused
    meanwhile is never killed by mistake.
    """
    for _ in range(200):
        targets = [p for p in _tree(root) + _orphans() if p.pid not in spare and running(p)]
        if not targets:
            return True
        for process in targets:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(targets, timeout=0.05)
    return False


def running(process: psutil.Process) -> bool:
    """Alive and not a zombie (a zombie holds nothing and is gone once its parent reaps it)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(root: int) -> list[psutil.Process]:
    try:
        process = psutil.Process(root)
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def _orphans() -> list[psutil.Process]:
    if _subreaper_since is None:
        return []
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.pid not in _started_by_us and child.create_time() >= _subreaper_since - 1:
                found += [child, *child.children(recursive=True)]
    return found


def children_of(process: psutil.Process) -> list[psutil.Process]:
    """`process.children()`, from the kernel's own list where it keeps one: psutil's walks every process
    on the machine, too slow to repeat twice a second beside a grading run."""
    try:
        with open(f"/proc/{process.pid}/task/{process.pid}/children", encoding="utf-8") as listing:
            return [psutil.Process(int(pid)) for pid in listing.read().split()]
    except (OSError, psutil.Error):
        return process.children()
