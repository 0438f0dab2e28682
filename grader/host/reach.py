"""`reach` tells whether uid 65534, which runs a root grader's submissions at every tier, can reach Python and
the stages' folder (TMPDIR), and if not, which chmod lets it: a condition of the machine the user can fix.

`tiers.choose` raises `tiers.Unreachable` with this line, before any tier is tried: no tier is a way round it.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID


def problem() -> str | None:
    """None unless the grader is root and uid 65534 cannot reach Python or the stages' folder (TMPDIR); then one
    line that names the topmost folder in the way and the chmod that lets it through.

    Every tier runs a root grader's submissions as uid 65534 (bubblewrap too, see `processes.as_sandbox_user`),
    so no tier is a way round: it is the machine's condition (a Python under /root, which most images keep
    0700), not the kit's, and the user fixes it. The probe runs as 65534; the folders below the first one in
    the way, which it cannot see, are judged from their modes.
    """
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    from grader.host.bubblewrap import python_folders, python_paths, stage_parent

    python = [sys.executable, os.path.realpath(sys.executable), *python_folders(), *python_paths()]
    wanted = {**{path: "Python" for path in python}, stage_parent(): "the temporary folder (TMPDIR)"}
    chains = {path: _chain(path) for path in wanted}
    steps = list(dict.fromkeys(step for chain in chains.values() for step in chain))
    read = [p for p in python_paths() if os.path.isdir(p)]  # listed by imports: a pip install under umask 077
    check = 'for a; do p=${a#?:}; case $a in x:*) [ -x "$p" ] || echo "$a";; r:*) [ -r "$p" ] || echo "$a";; esac; done'
    try:
        probe = subprocess.run(["/bin/sh", "-c", check, "sh", *(f"x:{p}" for p in steps), *(f"r:{p}" for p in read)],
                               capture_output=True, text=True, encoding="utf-8", timeout=30, cwd="/",
                               env={"PATH": "/usr/bin:/bin"},
                               preexec_fn=processes.as_sandbox_user)
    except (OSError, subprocess.SubprocessError):
        return None  # no verdict: the tiers' own probes say why they cannot be used
    refused = set(probe.stdout.splitlines())
    cross: dict[str, str] = {}  # each folder in the way -> the first path it keeps out of reach
    unread: dict[str, str] = {}  # each folder of packages that imports cannot list -> itself
    for path, chain in chains.items():
        first = next((i for i, step in enumerate(chain) if f"x:{step}" in refused), None)
        if first is not None:
            for step in [chain[first], *(s for s in chain[first + 1:] if _denies(s, stat.S_IXOTH))]:
                (unread if step in read else cross).setdefault(step, path)
    for path in read:  # out of the probe's sight where a folder above it is in the way: judged by its mode
        if f"r:{path}" in refused and (f"x:{path}" not in refused or _denies(path, stat.S_IROTH)):
            unread.setdefault(path, path)
    if not cross and not unread:
        return None
    path = next(p for p in chains if p in cross.values() or p in unread.values())
    by_mode: dict[str, list[str]] = {}
    for folder in cross:
        by_mode.setdefault(f"{_whose(folder)}+x", []).append(folder)
    for folder in unread:
        by_mode.setdefault(f"-R {_whose(folder)}+rX", []).append(folder)
    fixes = [f"chmod {mode} {' '.join(map(shlex.quote, folders))}" for mode, folders in by_mode.items()]
    unlisted = f" (nothing in {shlex.quote(next(iter(cross))) if len(cross) == 1 else 'them'} becomes readable)" \
        if not unread and all(os.path.isdir(f) for f in cross) else ""
    other = ", or set TMPDIR to a folder it can reach" if wanted[path] != "Python" else ""
    return (f"uid {SANDBOX_UID}, which runs the submissions, cannot reach {wanted[path]} at {path}: "
            f"{' and '.join(fixes)} {'let' if len(fixes) > 1 else 'lets'} it{unlisted}{other}")


def _chain(path: str) -> list[str]:
    """Every folder from the top down to `path`, and `path` itself: what must let others cross (/ aside)."""
    parts = Path(os.path.abspath(path)).parts[1:]
    return [os.path.join("/", *parts[:i]) for i in range(1, len(parts) + 1)]


def _whose(path: str) -> str:
    """Which of chmod's classes (u, g, o) uid 65534 falls in for `path`: the only bits a fix needs to change."""
    try:
        return _class_of(os.stat(path))
    except OSError:
        return "o"


def _denies(path: str, others: int) -> bool:
    """Whether `path`'s mode keeps uid 65534 from `others` (stat.S_IXOTH: crossing it, S_IROTH: listing it)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return not info.st_mode & others << {"u": 6, "g": 3, "o": 0}[_class_of(info)]


def _class_of(info: os.stat_result) -> str:
    return "u" if info.st_uid == SANDBOX_UID else "g" if info.st_gid == SANDBOX_UID else "o"
