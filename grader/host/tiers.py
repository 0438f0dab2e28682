"""`tiers` decides how strongly this machine can isolate a submission, strongest first, and says why not more.

- `bubblewrap`: namespaces (see `sandbox` and `bubblewrap`): the sandbox sees only Python and its own copy of the
  submission, as uid 65534 with no capability.
- `user`: the grader is root but cannot create namespaces (Docker's default seccomp profile,
  Gradescope, most CI). The sandbox runs as uid/gid 65534, which drops every capability; its
  environment is scrubbed; each worker's seccomp filter refuses sockets, new processes and signals
  to others; Landlock, where the kernel has it, lets it open files only in Python's installation,
  its staged copy and its scratch folder. Where Landlock is missing, file permissions must keep the
  kit's folder from uid 65534, and the probe checks that they do.
- `none`: neither (a student's laptop, macOS): resource limits, a private scratch folder, a scrubbed
  environment, the seccomp filter and Landlock where they exist. It runs as the grader's own user
  (65534 if that is root: root never runs a submission as root), so without Landlock it can read
  whatever that user can: the hidden tests and solutions included.

Each sandbox proves its tier at start (`confine.self_test`); one that fails is marked unsafe and
the next one started gets the next tier. `GRADER_SANDBOX=user` skips bubblewrap, `GRADER_SANDBOX=none`
skips both (and accepts grading unisolated).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote

from grader import settings
from grader.host import reach
from grader.inside.shared import libseccomp, processes
from grader.inside.shared.processes import SANDBOX_UID
from grader.kit import hidden_installed, kit_root
from grader.lang import listed, tr

TIERS = ("bubblewrap", "user", "none")


class IsolationRefused(RuntimeError):
    """Grading would expose the hidden tests or the solutions to an unisolated submission."""


class Unreachable(IsolationRefused):
    """uid 65534 cannot reach Python or the stages' folder: no tier can run a submission here until a chmod
    lets it. An IsolationRefused, so that every command refuses it as a usage error (exit 2), before grading."""


@dataclass(frozen=True)
class Choice:
    tier: str
    reasons: tuple[str, ...]  # why each stronger tier is not used

    def summary(self) -> str:
        return "; ".join(self.reasons)


_unsafe: dict[str, str] = {}  # tier -> why a sandbox of it failed its self-test here


def mark_unsafe(tier: str, reason: str) -> None:
    """A sandbox of `tier` failed its self-test: from now on this process grades below it, and says why."""
    _unsafe[tier] = reason
    _choose.cache_clear()


def requested(wanted: str | None = None) -> str:
    """The tier asked for: `wanted` where a job carries it (grader batch's slots, a Dask worker), else this process's
    GRADER_SANDBOX, else auto."""
    wanted = (settings.sandbox() if wanted is None else wanted) or "auto"
    if wanted not in ("auto", "user", "none"):
        raise ValueError(f"GRADER_SANDBOX={wanted!r} is not a tier you can ask for: use auto, user or none")
    return wanted


def choose(wanted: str | None = None) -> Choice:
    """The strongest tier that works here, or that the tier asked for leaves (`requested`; a misspelt one is a usage
    error); Unreachable, whatever the tier, where uid 65534 would run the submissions and cannot reach Python."""
    return _choose(requested(wanted))


@functools.cache
def _choose(wanted: str) -> Choice:
    from grader.host import portable
    from grader.host.bubblewrap import bwrap_problem

    problem = reach.problem()
    if problem is not None:
        raise Unreachable(problem)
    if portable.wanted():  # no zygote: no sandbox but the `none` tier's (see grader.host.portable)
        return Choice("none", (portable.reason(),))
    skipped = f"GRADER_SANDBOX={wanted} is set"
    reasons = []
    problem = skipped if wanted != "auto" else _unsafe.get("bubblewrap") or bwrap_problem()
    if problem is None:
        return Choice("bubblewrap", ())
    reasons.append(tr("no bubblewrap: {problem}", problem=problem))
    problem = skipped if wanted == "none" else _unsafe.get("user") or user_problem()
    if problem is None:
        return Choice("user", tuple(reasons))
    reasons.append(tr("no user tier: {problem}", problem=problem))
    return Choice("none", tuple(reasons))


def exposure(suite: str) -> str:
    """What an unisolated submission could read in this run ("" when nothing): refused at the `none` tier."""
    exposed = []
    if suite in ("hidden", "all") and hidden_installed():
        exposed.append(tr("the hidden tests"))
    if any((kit_root() / "solutions").glob("*.py")):
        exposed.append(tr("the reference solutions"))
    return tr("{what} are installed here", what=listed(exposed)) if exposed else ""


def accepted_unisolated(wanted: str | None = None) -> bool:
    """GRADER_SANDBOX=none (or a job's `none`) means the operator chose no isolation, knowing what it exposes."""
    return requested(wanted) == "none"


def refuse_unless_isolated(*, why: str, allowed: bool, wanted: str | None = None) -> Choice:
    """The tier to grade at; IsolationRefused when it is `none` and the run has something to protect (`why`).
    `wanted`: the tier asked for, where a job carries it (see `requested`)."""
    from grader.host import portable

    choice = choose(wanted)
    if choice.tier != "none" or not why or allowed or accepted_unisolated(wanted):
        return choice
    if portable.wanted():
        raise IsolationRefused(tr(
            "refused: {why}, and workers are spawned here without isolation ({reasons}), so the submission could "
            "read them; {fix}, or pass --allow-unisolated (or set GRADER_SANDBOX=none) to accept that",
            why=why, reasons=choice.summary(), fix=portable.remedy()))
    raise IsolationRefused(tr(
        "refused: {why}, and this machine offers no isolation ({reasons}), so the submission could read them; run "
        "the grader as root or where bubblewrap works, or pass --allow-unisolated (or set GRADER_SANDBOX=none) to "
        "accept that", why=why, reasons=choice.summary()))


def warnings(tier: str, exposed: list[str], reasons: tuple[str, ...] = ()) -> list[str]:
    """What a report below bubblewrap says: the tier, why no stronger one (`reasons`, the Choice its sandbox was
    opened with), and what the sandbox did not stop."""
    from grader.host import portable

    why = "; ".join(reasons) or tr("a stronger sandbox failed its self-test")
    lines = [tr("sandbox: {tier}, not bubblewrap ({why})", tier=tier, why=why)]
    if tier == "none" and portable.wanted():
        lines.append(tr("workers were started on their own (spawn), unconfined: a submission could read and change "
                        "whatever this user can, and reach the network"))
        return lines
    if exposed:
        lines.append(tr("the {tier} sandbox's self-test found that a submission can: {found}", tier=tier,
                        found="; ".join(exposed)))
    elif tier == "none":
        lines.append(tr("the none sandbox hid the kit's files and the grader's environment (its self-test checked), "
                        "but it runs as the grader's own user"))
    return lines


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (not Linux, too old, disabled, or blocked).

    GRADER_LANDLOCK=off makes it 0 here too: how the kit's tests reproduce a kernel without it.
    """
    if not sys.platform.startswith("linux") or settings.landlock_off():
        return 0
    try:
        import landlock

        return int(landlock.landlock_abi_version())
    except Exception:  # the library raises its own errors for ENOSYS, EOPNOTSUPP, and a seccomp's EPERM
        return 0


_secrets: list[Path] = []


def protect(path: Path) -> None:
    """Keep `path` (a batch's submissions or reports) from the sandbox, as the kit's own folder is."""
    if path.resolve() in _secrets:
        return
    _secrets.append(path.resolve())
    _choose.cache_clear()
    user_problem.cache_clear()


def secrets() -> list[str]:
    return list(dict.fromkeys(str(p) for p in [kit_root().resolve(), *_secrets]))


@functools.cache
def user_problem() -> str | None:
    """None when the `user` tier holds here, else why not."""
    if not sys.platform.startswith("linux"):
        return "it needs Linux"
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot run submissions as a user of their own"
    problem = libseccomp.available()
    if problem is not None:
        return f"workers cannot be kept off the network: {problem}"
    # As uid 65534: Python must be reachable, and (without Landlock) no secret may be.
    from grader.host.bubblewrap import python_paths, stage_parent

    reach = [sys.executable, *python_paths(), stage_parent()]
    # An installed copy of the kit in site-packages counts too (Landlock hides it; bubblewrap covers it).
    installed = [str(Path(site) / name) for site in python_paths() for name in KIT_PACKAGES[:2]
                 if (Path(site) / name).is_dir()]
    hidden = [] if landlock_abi() else [*secrets(), *installed, *editable_checkouts()]
    check = ('for p; do case $p in +*) p=${p#+}; [ -x "$p" ] || { echo "cannot reach $p: let others cross it and the '
             'folders above it (chmod o+x)"; exit 3; };; -*) p=${p#-}; if [ -r "$p" ] || [ -x "$p" ]; then echo "$p is '
             'readable by other users and this kernel has no Landlock to hide it: chmod -R go-rwx it"; exit 3; fi;; '
             'esac; done')
    try:
        probe = subprocess.run(["/bin/sh", "-c", check, "sh", *(f"+{p}" for p in reach), *(f"-{p}" for p in hidden)],
                               capture_output=True, encoding="utf-8", timeout=30, cwd="/",
                               env={"PATH": "/usr/bin:/bin"}, preexec_fn=processes.as_sandbox_user)
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot run a process as uid {SANDBOX_UID} ({error})"
    if probe.returncode != 0:
        said = probe.stdout.strip() or probe.stderr.strip() or f"the probe as uid {SANDBOX_UID} failed"
        return said.splitlines()[-1]
    return None


def editable_checkouts() -> list[str]:
    """The checkouts an editable install of the kit points at (PEP 610's direct_url.json), other than the one
    that grades: the venv's site-packages names them, so without Landlock their solutions and hidden tests
    are as much within a submission's reach as this copy's."""
    found = []
    for dist in metadata.distributions():
        if (dist.metadata["Name"] or "").lower().replace("_", "-") != "attention-kit":
            continue
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        url = info.get("url", "") if isinstance(info, dict) else ""
        if isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable") and url.startswith("file://"):
            folder = Path(unquote(url.removeprefix("file://")))
            if folder.is_dir() and folder.resolve() != kit_root().resolve():
                found.append(str(folder))
    return list(dict.fromkeys(found))


SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys", "/dev")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
KIT_PACKAGES = ("solutions", "tests", "grader", "exercises")  # an installed copy of the kit, in site-packages


def fence(stage: Path, scratch: Path, python_paths: tuple[str, ...]) -> dict[str, object]:
    """The zygote's configuration outside bubblewrap: what its self-test must find hidden, and, where the
    kernel has Landlock, the only places it may open (read: the system's libraries, Python, the stage;
    anything: its scratch folder). An installed copy of the kit inside site-packages stays out of sight.
    """
    folders = secrets()
    config: dict[str, object] = {"secrets": [*folders, *_samples(folders)], "grader": os.getpid()}
    if not landlock_abi():
        return config
    hidden = {Path(p) for p in folders}
    hidden |= {Path(site) / name for site in python_paths for name in KIT_PACKAGES if (Path(site) / name).is_dir()}
    readable = [p for p in SYSTEM_FILES if os.path.exists(p)]
    for path in dict.fromkeys([*SYSTEM_FOLDERS, sys.base_prefix, sys.prefix, *python_paths]):
        readable += _allowed(Path(path), hidden)
    config["fence"] = {"read": [*dict.fromkeys(readable), str(stage)], "write": [str(scratch), "/dev/null"]}
    return config


def _samples(folders: list[str]) -> list[str]:
    """A file inside each secret folder (the kit's own solution first): a folder others may cross but not
    list still gives away every file whose name is known, so the self-test tries to read one."""
    samples = []
    for folder in map(Path, folders):
        known = folder / "solutions" / "attention.py"
        try:
            found = known if known.is_file() else next((e for e in folder.iterdir() if e.is_file()), None)
        except OSError:
            found = None
        if found is not None:
            samples.append(str(found))
    return samples


def _allowed(folder: Path, hidden: set[Path]) -> list[str]:
    """`folder`, or, when something hidden lies beneath it, every entry beside the way down to it."""
    if not folder.exists() or folder in hidden:
        return []
    if not any(h.is_relative_to(folder) for h in hidden):
        return [str(folder)]
    try:
        return [path for entry in folder.iterdir() for path in _allowed(entry, hidden)]
    except OSError:
        return []
