"""`processes` holds the Linux process controls both sides of the boundary use; standard library only.

Finding and killing process trees is the trusted side's job (`sandbox`, through psutil, from the
host's own view of the processes); these are only the kernel settings a process makes for itself,
and each is a no-op where the kernel does not offer it (macOS).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

SANDBOX_UID = 65534  # "nobody": the sandbox's uid and gid in the bubblewrap and user tiers
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


def as_sandbox_user() -> None:
    """(A preexec_fn.) Become uid/gid 65534 with no supplementary groups when we are root, and die with our parent.

    bubblewrap started by root maps the sandbox's uid to root outside: no capability is left, but
    the kernel still treats the sandbox as root wherever it checks only the uid (/proc/sys and
    /proc/sysrq-trigger, owned by root and writable by their owner, are such places), and does not
    count its processes against RLIMIT_NPROC. Started as 65534, it is 65534 inside and out. In the
    `user` tier this is the whole separation: setuid away from root clears every capability.
    """
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(SANDBOX_UID)
        os.setuid(SANDBOX_UID)
    die_with_parent(signal.SIGKILL)  # after setuid, which clears the parent-death signal
