"""`bubblewrap` builds the sandbox's command line: bubblewrap's arguments, the environment, and whether it works here.

Python's installation (`python_paths`), the stages' folder (`stage_parent`) and the environment
(`worker_environment`) are the same for every tier; only bubblewrap's namespaces and mounts are not.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.host.limits import Limits
from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can sandbox here, else why not (for a one-line warning)."""
    if _bwrap() is None:
        return "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`"
    # The probe runs the sandbox's own command line, as its user (65534 when we are root), and checks
    # that Python and the packages the worker imports are readable there.
    needed = [sys.executable, *python_paths(), stage_parent()]
    check = ('for p; do [ -x "$p" ] || { echo "cannot reach ${p#/host} as uid $(id -u): let others cross it and the '
             'folders above it (chmod o+x), or set TMPDIR to a folder they can" >&2; exit 3; }; done')
    try:
        probe = subprocess.run(
            [*bwrap_command(None, "cpu", Limits(), more=("--ro-bind", "/", "/host")), "/bin/sh", "-c", check, "sh",
             *(f"/host{p}" for p in needed)],
            capture_output=True, text=True, timeout=30, cwd="/", preexec_fn=processes.as_sandbox_user,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap cannot run here ({error})"
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["unknown error"])[-1]
        if "Permission denied" in reason and os.geteuid() == 0:
            reason += f"; bubblewrap runs as uid {SANDBOX_UID} when the grader is root: let others cross the folders " \
                      "above Python and TMPDIR (chmod o+x)"
        return f"bubblewrap cannot create a sandbox on this machine ({reason})"
    return None


def stage_parent() -> str:
    """Where sandboxes' stages go: GRADER_STAGE_DIR (a batch's own folder), else the temporary folder."""
    return os.environ.get("GRADER_STAGE_DIR") or tempfile.gettempdir()


def _namespaces() -> list[str]:
    """Every namespace, and inside them an unprivileged uid/gid with no capability, whoever we are."""
    return ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--cap-drop", "ALL", "--die-with-parent", "--new-session"]


def worker_environment() -> dict[str, str]:
    """A fixed allow-list: nothing of the grader's own environment (tokens, secrets) reaches the sandbox.

    HOME and TMPDIR are /tmp (bubblewrap's tmpfs); outside bubblewrap the zygote points them at its
    scratch folder itself, once it is no longer dumpable (so that no other process reads the path).
    """
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for name in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
        if name in os.environ:
            environment[name] = os.environ[name]
    return environment


@functools.cache
def python_paths() -> tuple[str, ...]:
    """Where the worker finds torch and safetensors; never the kit's own folder."""
    paths = []
    for name in ("torch", "safetensors", "numpy"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed: the grader needs it (pip install {name})")
        paths.append(str(Path(spec.origin).resolve().parent.parent))
    paths += [p for p in site.getsitepackages() if os.path.isdir(p)]
    return tuple(dict.fromkeys(paths))


def _bwrap() -> str | None:
    """The bubblewrap program: GRADER_BWRAP where set, else `bwrap` on PATH."""
    return os.environ.get("GRADER_BWRAP") or shutil.which("bwrap")


def bwrap_command(stage: Path | None, device: str, limits: Limits, *, more: tuple[str, ...] = ()) -> list[str]:
    """bubblewrap's arguments for a sandbox of `stage` (None: the same sandbox without one, for the probe).

    `more` goes after every other mount, before / is made read-only. bubblewrap may run as uid
    65534: every folder above a bound path must let others cross it (`bwrap_problem` checks).
    """
    command = [_bwrap() or "bwrap", *_namespaces(), "--proc", "/proc", "--dev", "/dev"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(path):
            command += ["--ro-bind", path, path]
    bound: list[str] = []
    for path in [sys.base_prefix, sys.prefix, *python_paths()]:
        real = os.path.realpath(path)
        if not any(real == b or real.startswith(b + os.sep) for b in bound):
            command += ["--ro-bind", real, real]
            if real != path:
                command += ["--symlink", real, path]
            bound.append(real)
    # An installed copy of the kit inside site-packages must stay out of sight too.
    for site_dir in python_paths():
        for name in ("solutions", "tests", "grader", "exercises"):
            if os.path.isdir(os.path.join(site_dir, name)):
                command += ["--tmpfs", os.path.realpath(os.path.join(site_dir, name))]
    if needs_gpu(device):
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
        for name in sorted(os.listdir("/dev")):
            if name.startswith("nvidia"):
                command += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    # Scratch space: /tmp gets three quarters of the cap, /dev/shm the rest; nothing else is writable.
    shm = max(2**20, limits.scratch_bytes // 4)
    command += ["--size", str(limits.scratch_bytes - shm), "--tmpfs", "/tmp",
                "--size", str(shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    if stage is not None:
        command += ["--ro-bind", str(stage), "/sandbox"]
    return [*command, *more, "--remount-ro", "/", "--chdir", "/tmp", "--"]


def needs_gpu(device: str) -> bool:
    """Whether the sandbox needs the GPU's devices: asked for, or `auto` on a machine that has NVIDIA devices."""
    if device == "cpu":
        return False
    with contextlib.suppress(OSError):
        return any(name.startswith("nvidia") for name in os.listdir("/dev"))
    return False
