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

from grader import settings
from grader.host.limits import Limits
from grader.inside.shared import processes
from grader.inside.shared.processes import SANDBOX_UID


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can sandbox here, else why not (for a one-line warning)."""
    if _bwrap() is None:
        return "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap`"
    covered = [p for mount in _python_mounts() for p in mount if p in SCRATCH_FOLDERS]
    if covered:
        return f"Python is installed at {covered[0]}, where the sandbox has its own scratch space: install it elsewhere"
    # The probe runs the sandbox's own command line, as its user (65534 when we are root), and checks
    # that Python and the packages the worker imports are readable there, and that Python is where
    # the sandbox will start it, not hidden by one of its mounts.
    needed = [sys.executable, *python_paths(), stage_parent()]
    check = ('exe=$1; shift; for p; do [ -x "$p" ] || { echo "cannot reach ${p#/host} as uid $(id -u): let others '
             'cross it and the folders above it (chmod o+x), or set TMPDIR to a folder they can" >&2; exit 3; }; done; '
             '[ -x "$exe" ] || { echo "the sandbox\'s mounts hide Python ($exe)" >&2; exit 3; }')
    try:
        probe = subprocess.run(
            [*bwrap_command(None, "cpu", Limits(), more=("--ro-bind", "/", "/host")), "/bin/sh", "-c", check, "sh",
             sys.executable, *(f"/host{p}" for p in needed)],
            capture_output=True, text=True, encoding="utf-8", timeout=30, cwd="/",
            preexec_fn=processes.as_sandbox_user,
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
    return settings.stage_dir() or tempfile.gettempdir()


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
    return settings.bwrap() or shutil.which("bwrap")


def bwrap_command(stage: Path | None, device: str, limits: Limits, *, more: tuple[str, ...] = ()) -> list[str]:
    """bubblewrap's arguments for a sandbox of `stage` (None: the same sandbox without one, for the probe).

    `more` goes after every other mount, before / is made read-only. bubblewrap may run as uid
    65534: every folder above a bound path must let others cross it (`reach.problem` checks).
    bubblewrap mounts in the order of its arguments, so a Python under /tmp or /dev/shm (a venv in
    /tmp) is bound after the sandbox's own tmpfs there, inside a read-only tmpfs of its own
    (`python_in_scratch`): the sandbox can neither write beside it nor move or remove it.
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
    late = [(real, path) for real, path in _python_mounts() if _scratch_top(real) or _scratch_top(path)]
    for real, path in _python_mounts():
        if (real, path) not in late:
            command += _bind(real, path)
    if needs_gpu(device):
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
        for name in sorted(os.listdir("/dev")):
            if name.startswith("nvidia"):
                command += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    # Scratch space: /tmp gets three quarters of the cap, /dev/shm the rest; nothing else is writable.
    shm = max(2**20, limits.scratch_bytes // 4)
    command += ["--size", str(limits.scratch_bytes - shm), "--tmpfs", "/tmp",
                "--size", str(shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    tops = [os.path.join(folder, name) for folder in SCRATCH_FOLDERS for name in python_in_scratch(folder)]
    for top in tops:
        command += ["--size", str(_SKELETON_BYTES), "--tmpfs", top]
    for real, path in late:
        command += _bind(real, path)
    # An installed copy of the kit inside site-packages must stay out of sight too; read-only, or
    # its tmpfs would be scratch space beyond the cap that no clean-up empties.
    for site_dir in python_paths():
        for name in ("solutions", "tests", "grader", "exercises"):
            if os.path.isdir(os.path.join(site_dir, name)):
                hidden = os.path.realpath(os.path.join(site_dir, name))
                command += ["--size", str(_SKELETON_BYTES), "--tmpfs", hidden, "--remount-ro", hidden]
    for top in tops:
        command += ["--remount-ro", top]
    if stage is not None:
        command += ["--ro-bind", str(stage), "/sandbox"]
    return [*command, *more, "--remount-ro", "/", "--chdir", "/tmp", "--"]


SCRATCH_FOLDERS = ("/tmp", "/dev/shm")  # the sandbox's own tmpfs mounts, which hide what the host keeps there
_SKELETON_BYTES = 65536  # a read-only tmpfs that holds only the folders that Python is bound on


@functools.cache
def _python_mounts() -> tuple[tuple[str, str], ...]:
    """(real path, path) of each folder of Python's installation to bind, outermost first; a folder
    inside one already bound is not bound again."""
    reals = {os.path.realpath(p): p for p in reversed([sys.base_prefix, sys.prefix, *python_paths()])}
    mounts: list[tuple[str, str]] = []
    for real in sorted(reals, key=lambda r: r.count(os.sep)):
        if not any(real == b or real.startswith(b + os.sep) for b, _ in mounts):
            mounts.append((real, reals[real]))
    return tuple(mounts)


def python_folders() -> tuple[str, ...]:
    """Every folder of Python's installation, as named and as it really is."""
    return tuple(dict.fromkeys(p for mount in _python_mounts() for p in mount))


def _bind(real: str, path: str) -> list[str]:
    """`real` at its place, and at `path` when that is a link to it: bound there too where the link lives in the
    sandbox's scratch (a venv in /tmp that links elsewhere), whose tmpfs a submission could unlink it from."""
    if real == path:
        return ["--ro-bind", real, real]
    return ["--ro-bind", real, real, "--ro-bind" if _scratch_top(path) else "--symlink", real, path]


def _scratch_top(path: str) -> str | None:
    """The name right under /tmp or /dev/shm of the folder that holds `path`, where the sandbox's tmpfs would
    hide it; None elsewhere."""
    for folder in SCRATCH_FOLDERS:
        if path.startswith(folder + os.sep):
            return path[len(folder) + 1:].split(os.sep)[0]
    return None


def python_in_scratch(folder: str) -> tuple[str, ...]:
    """The names in `folder` (/tmp or /dev/shm) under which Python's installation is bound into the sandbox:
    mount points that the clean-up between two submissions keeps (`scratch.empty`)."""
    names = [_scratch_top(p) for mount in _python_mounts() for p in mount
             if p.startswith(folder + os.sep)]
    return tuple(dict.fromkeys(n for n in names if n))


def needs_gpu(device: str) -> bool:
    """Whether the sandbox needs the GPU's devices: asked for, or `auto` on a machine that has NVIDIA devices."""
    if device == "cpu":
        return False
    with contextlib.suppress(OSError):
        return any(name.startswith("nvidia") for name in os.listdir("/dev"))
    return False
