"""`processes` holds the Linux process controls both sides of the boundary use; standard library only.

Finding and killing process trees is the trusted side's job (`sandbox`, through psutil, from the
host's own view of the processes); these are only the kernel settings a process makes for itself,
and each is a no-op where the kernel does not offer it (macOS).
"""

from __future__ import annotations

import ctypes
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(signum: int) -> None:
    """Have the kernel send us `signum` when the thread that started us dies."""
    _prctl(_PR_SET_PDEATHSIG, signum)


def become_subreaper() -> bool:
    """Make orphans of our descendants our children (so that they can still be found and killed)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def undumpable() -> bool:
    """No core dumps, and no ptrace or /proc/PID/mem access by processes without CAP_SYS_PTRACE."""
    return _prctl(_PR_SET_DUMPABLE, 0)
