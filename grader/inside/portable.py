"""`portable` starts a worker on its own, where there is no zygote to fork it: Windows, macOS, `GRADER_WORKERS=spawn`.

The trusted side (`grader.host.portable`) starts `python -I -S`, which reads the worker's configuration
from the first line of its standard input (the paths to import from, a byte at a time: a buffered
read could take the first request too) and calls `main`; the rest of standard input carries requests,
and standard output replies, in the protocol's frames (`shared.protocol`: JSON + safetensors, never
pickles). Before any submission code runs, the two are moved to descriptors of their own: what the
submission prints goes to standard error, which the trusted side keeps the tail of, and `input()`
reads an empty file. No seccomp, no Landlock, no namespaces here: this is the `none` tier, and reports
say so. Standard library and torch only, nothing that exists on Linux alone.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

# Limits a worker sets on itself where the OS has them (macOS; the trusted side sends none for Windows, where a
# Job Object bounds the memory, nor for GRADER_WORKERS=spawn on Linux, which rehearses the path with none).
_RLIMITS = ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_DATA")


def main(config: dict[str, Any]) -> None:
    home = config.get("home")
    if home:
        os.chdir(home)
    fd_in, fd_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # print() goes where the trusted side collects the submission's output
    # ... in UTF-8, as the trusted side decodes it, not the locale's code page (cp936 on a Chinese Windows):
    # `python -I` ignores PYTHONIOENCODING.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(encoding="utf-8", errors=stream.errors)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the life of the process
    _limit(config.get("limits") or {})

    import torch

    torch.set_num_threads(1)
    if config.get("warm"):
        _warm_up(torch)
    from . import worker

    worker.serve(fd_in, fd_out, limits={}, threads=int(config.get("threads", 1)))


def _limit(limits: dict[str, int]) -> None:
    """Each limit the OS takes; one it refuses (macOS refuses some values of RLIMIT_DATA) is left as it was."""
    if not limits:
        return
    import resource

    for name in _RLIMITS:
        value = limits.get(name)
        if value is None or not hasattr(resource, name):
            continue
        kind = getattr(resource, name)
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(kind, (value, value))


def _warm_up(torch: Any) -> None:
    """What the zygote's warm-up pays once for every worker it forks: here each warm worker pays it (about a second)."""
    from .shared import instrument, probes

    with contextlib.suppress(Exception):
        instrument.count_ops(torch.add, [torch.zeros(2), 1], {})
    with contextlib.suppress(Exception):
        probes.on_another_device(torch.neg, {"shape": [2], "dtype": "float32"})
