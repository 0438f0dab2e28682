"""`libseccomp` finds libseccomp's Python bindings: whether workers can be confined on this machine.

The trusted side asks (`available`) to choose an isolation tier; `confine` loads them to confine workers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Unavailable(RuntimeError):
    """This machine has no seccomp (not Linux, or libseccomp missing): workers cannot be confined."""


def load() -> Any:
    """libseccomp's Python bindings, `pyseccomp`; Unavailable where they cannot load."""
    try:
        with _known_libraries():
            import pyseccomp
    except (ImportError, OSError, RuntimeError) as error:  # pyseccomp raises when libseccomp.so is absent
        raise Unavailable(f"libseccomp is not usable here ({error})") from None
    return pyseccomp


@contextlib.contextmanager
def _known_libraries() -> Iterator[None]:
    """pyseccomp finds libc and libseccomp with ctypes.util.find_library, which runs `ldconfig -p` each
    time (30 ms of every sandbox's start); where the usual sonames load, they are the answer."""
    import ctypes.util

    find = ctypes.util.find_library
    known = {}
    for name, soname in (("c", "libc.so.6"), ("seccomp", "libseccomp.so.2")):
        with contextlib.suppress(OSError):
            ctypes.CDLL(soname)
            known[name] = soname
    ctypes.util.find_library = lambda name: known.get(name) or find(name)
    try:
        yield
    finally:
        ctypes.util.find_library = find


def available() -> str | None:
    """None when workers can be confined here, else why not."""
    try:
        load()
    except Unavailable as error:
        return str(error)
    return None
