"""`scratch` removes what sandboxes leave behind: their scratch space, their stages, their files in shared folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from grader.host.limits import WorkerStartError
from grader.inside.shared.processes import SANDBOX_UID


def files_in(folder: Path) -> int:
    """How many inodes a (tmpfs) file system uses."""
    usage = os.statvfs(folder)
    return usage.f_files - usage.f_ffree


def shared_folders() -> tuple[str, ...]:
    """The folders every user can write in, where a sandbox's uid may leave files (where no Landlock keeps it out)."""
    return tuple(dict.fromkeys(("/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir())))


def _top_of_shared_folders() -> Iterator[tuple[os.DirEntry[str], os.stat_result]]:
    """Each entry at the top of the shared folders, with its own (not a link's) status; unreadable ones skipped."""
    for shared in shared_folders():
        with contextlib.suppress(OSError), os.scandir(shared) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield entry, info


def shared_entries() -> frozenset[tuple[int, int]]:
    """What is at the top of the shared folders now, by device and inode: what `remove_sandbox_files` keeps."""
    return frozenset((info.st_dev, info.st_ino) for _, info in _top_of_shared_folders())


def remove_sandbox_files(*, uid: int = SANDBOX_UID, keep: frozenset[tuple[int, int]] = frozenset()) -> None:
    """Remove what the sandbox's uid left in the shared writable folders (where no Landlock kept it out),
    so that the next submission graded as the same uid finds nothing of the last one; never a folder that
    holds Python's installation (a venv in /tmp), whoever owns it, nor what `keep` names (`shared_entries`
    taken before the sandbox ran: where `uid` is also the grader's, what was there before is not the sandbox's)."""
    from grader.host.bubblewrap import python_folders

    python = python_folders()
    for entry, info in _top_of_shared_folders():
        if info.st_uid != uid or (info.st_dev, info.st_ino) in keep \
                or any(p == entry.path or p.startswith(entry.path + os.sep) for p in python):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(info.st_mode):
                remove(Path(entry.path))
            else:
                os.unlink(entry.path)


def holds_over(folder: Path, *, files: int, size: int) -> bool:
    """Whether `folder` holds more than `files` entries or `size` bytes; stops counting once it does."""
    seen, used, pending = 0, 0, [str(folder)]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                seen += 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        used += entry.stat(follow_symlinks=False).st_blocks * 512
                if seen > files or used > size:
                    return True
    return False


def remove_stale_stages(folder: Path | None = None) -> None:
    """Remove the stages (`grader-<pid>-*`, `grader-batch-<pid>-*`, a Dask worker's `grader-cluster-<pid>-*`) of
    grader processes that were killed outright."""
    folder = folder or Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            parts = entry.name.split("-")
            named = entry.name.startswith(("grader-batch-", "grader-cluster-"))
            pid = parts[2] if named and len(parts) > 3 else parts[1] if len(parts) > 2 and not named else ""
            if entry.name.startswith("grader-") and pid.isdigit() and not psutil.pid_exists(int(pid)) \
                    and entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.geteuid():
                remove(entry)


def empty(folder: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove everything in `folder` (modes a submission set included) but the mount points named in `keep`;
    WorkerStartError if anything else is left, or a kept one is gone or no longer a mount point.

    `keep` names where Python's installation is bound into the sandbox's /tmp (a venv there): a read-only
    mount that the sandbox can neither move nor remove, and that no clean-up may walk into.
    """
    try:
        device = os.stat(folder).st_dev
        kept = set()
        for entry in os.scandir(folder):
            if entry.name in keep and entry.stat(follow_symlinks=False).st_dev != device:
                kept.add(entry.name)
            elif entry.is_dir(follow_symlinks=False):
                remove(Path(entry.path))
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        left = set(os.listdir(folder)) - kept
    except (OSError, RecursionError) as error:  # a tree deeper than rmtree's recursion: the sandbox goes
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be emptied: {error}") from None
    if left:
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be emptied ({len(left)} left)")
    if kept != set(keep):
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} lost the mount of Python's installation")


def remove(path: Path) -> None:
    """shutil.rmtree, also through folders whose owner took away its own permissions, and through trees deeper
    than Python's recursion (a submission can nest folders thousands deep). OSError when it cannot.

    Nothing above `path` is touched: its parent may be /tmp itself."""
    top = os.path.abspath(path)

    def retry(function: Any, name: str, _: Any) -> None:
        with contextlib.suppress(OSError):
            parent = os.path.dirname(name)
            if parent == top or parent.startswith(top + os.sep):
                os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, stat.S_IRWXU)
            if function in (os.open, os.scandir, os.listdir):  # a folder it could not enter, and left whole
                shutil.rmtree(name, onerror=retry)
            else:
                function(name)

    with contextlib.suppress(OSError):
        if not os.path.islink(top):
            os.chmod(top, stat.S_IRWXU)
    try:
        shutil.rmtree(top, onerror=retry)
    except RecursionError:
        _remove_deep(top)


def _remove_deep(path: str) -> None:
    """A tree too deep for rmtree's recursion, removed by coreutils, which walk it without recursion and follow
    no link (`chmod -R` first where we are not root, for folders the submission closed to its own user)."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "u+rwx", "--", path], capture_output=True, timeout=600, check=False)
    try:
        done = subprocess.run(["rm", "-rf", "--one-file-system", "--", path], capture_output=True, text=True,
                              timeout=600, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        raise OSError(f"{path} could not be removed: {error}") from None
    if os.path.lexists(path):
        said = done.stderr.strip().splitlines()
        raise OSError(f"{path} could not be removed: {said[-1] if said else f'rm exited {done.returncode}'}")


def reset(folder: Path, mode: int, when_ns: int) -> None:
    """Give an emptied scratch folder back the mode and times it started with, checked: a submission may change
    both (chmod 0 on /tmp would fail the next student's tempfile; times would carry a few bits to them).
    WorkerStartError when it cannot."""
    try:
        os.chmod(folder, mode)
        os.utime(folder, ns=(when_ns, when_ns))
        now = os.stat(folder)
    except OSError as error:
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be reset: {error}") from None
    if stat.S_IMODE(now.st_mode) != mode or now.st_mtime_ns != when_ns:
        raise WorkerStartError(f"the sandbox's scratch folder {folder.name} could not be reset")
