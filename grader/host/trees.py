"""`trees` finds and kills process trees from the host's view (psutil), escaped orphans included.

Never from anything a sandbox reports or mounts. This process becomes a child subreaper, so that
even children that called setsid() come back to it to be killed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import psutil

from grader.inside.shared import processes

_started_by_us: set[int] = set()
_subreaper_since: float | None = None  # when this process became a child subreaper (time.time())
# Held from starting a child until it is adopted, and while orphans are listed: a watcher listing them in between
# would take the new child for one escaped from its worker, and kill it with that worker's tree.
_starting = threading.Lock()


def become_subreaper() -> None:
    """Make this process a child subreaper, once: orphans of the trees it starts are re-parented to it."""
    global _subreaper_since
    if _subreaper_since is None and processes.become_subreaper():
        _subreaper_since = time.time()


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Start a child and `adopt` it inside this block: no orphan listing sees it in between."""
    with _starting:
        yield


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
    return orphans(since=_subreaper_since - 1) if _subreaper_since is not None else []


def orphans(*, since: float) -> list[psutil.Process]:
    """What escaped the trees this process started (setsid, a double fork) and was handed to it, the subreaper:
    its children born since `since` (time.time()) that it did not start itself, and theirs; none where this process
    is no subreaper (not Linux).

    Never a child in this process's own session: every worker runs in a session of its own (bubblewrap's
    --new-session, the zygote's setsid, the spawned worker's start_new_session), and a process can only stay in its
    parent's session or start a new one, so nothing a worker started is in ours. What is, this process started
    itself without `adopt` (a batch slot, a command a test runs)."""
    if _subreaper_since is None:
        return []
    found = []
    with _starting:
        children = children_of(psutil.Process())
    ours = os.getsid(0)
    for child in children:
        with contextlib.suppress(psutil.Error, OSError):
            if child.pid not in _started_by_us and child.create_time() >= since and os.getsid(child.pid) != ours:
                found += [child, *descendants_of(child)]
    return found


def reap(found: list[psutil.Process]) -> None:
    """Reap the zombies among `found` that are this process's children (orphans handed to it): nobody else will."""
    if _subreaper_since is None:
        return
    for process in found:
        if not running(process) and process.pid not in _started_by_us:
            with contextlib.suppress(OSError):
                os.waitpid(process.pid, os.WNOHANG)


def children_of(process: psutil.Process) -> list[psutil.Process]:
    """`process.children()`, from the kernel's own lists where it keeps them (one per thread; an orphan handed to a
    subreaper may be on any): psutil's walks every process on the machine, too slow to repeat ten times a second
    beside a grading run."""
    found: list[psutil.Process] = []
    try:
        tasks = os.listdir(f"/proc/{process.pid}/task")
        if not os.path.exists(f"/proc/{process.pid}/task/{process.pid}/children"):  # no CONFIG_PROC_CHILDREN
            return process.children()
    except OSError:
        try:
            return process.children()  # not Linux
        except psutil.Error:
            return []
    for task in tasks:
        with contextlib.suppress(OSError), open(f"/proc/{process.pid}/task/{task}/children",
                                                encoding="utf-8") as listing:  # OSError: the thread ended
            for pid in listing.read().split():
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(int(pid)))
    return found


def descendants_of(process: psutil.Process) -> list[psutil.Process]:
    """Every process below `process`, from the kernel's lists (see `children_of`)."""
    found, pending = [], [process]
    while pending:
        children = children_of(pending.pop())
        found += children
        pending += children
    return found
