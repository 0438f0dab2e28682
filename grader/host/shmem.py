"""`shmem` measures the shared memory a spawned worker holds, which no process's resident size shows (Linux).

A file in a tmpfs (/dev/shm, a /tmp or /run/user/UID that is one) keeps its pages after the process that wrote
them is gone; a memfd, a file unlinked but still open or mapped, a shared anonymous mapping that a child filled
and a System V segment hold pages that a process's resident size shows only where that process mapped and
touched them itself. The trusted watcher of a spawned worker (`spawned`) adds them to its tree's resident size:

- the files in every writable tmpfs or ramfs that the worker's uid owns; where that uid is the grader's own, only
  those created or changed since the submission's grading started (by ctime, which no process can set back);
- each shared-memory object a process of the tree holds open or mapped, once, by the pages it holds (a grader of
  the worker's own uid cannot read a mapping's object that no descriptor holds, and counts the mapping's length);
- the System V segments of the worker's uid (created since the grading started, where it is the grader's).

What it cannot read counts as past any limit (a tree process that made itself undumpable to a grader of its uid,
more files than the watcher walks), or by how much its mount grew since the grading started (a folder of the
worker's closed to a grader of its uid, which cannot tell the growth of the worker's from others'). Elsewhere
there is no /proc to read: `SharedMemory.for_worker` gives None (macOS's rlimits and Windows' Job Object bound a
worker there).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import threading
import time
from dataclasses import dataclass, field

import psutil

from grader.host import trees

HIDDEN = sys.maxsize  # what a worker holds where the grader cannot look: past any limit
CTIME_SLACK_S = 0.1  # a file's ctime comes from the kernel's coarse clock, up to a tick behind time.time()
IPC_RMID = 0


@dataclass(frozen=True)
class Mount:
    """A writable tmpfs or ramfs: its folder, as this process sees it, and the device its files report."""

    path: str
    device: int


@dataclass
class _Walk:
    """One mount's files that count, as last walked, and the mount's use then: walked again only once it changes."""

    use: tuple[int, int] = (-1, -1)
    files: dict[tuple[int, int], int] = field(default_factory=dict)
    closed: bool = False  # a folder of theirs that they closed to us: what it holds is not in `files`
    too_many: bool = False  # more files of theirs than the watcher walks


def _used(path: str) -> int:
    """Bytes in use on the file system at `path`."""
    usage = os.statvfs(path)
    return (usage.f_blocks - usage.f_bfree) * usage.f_frsize


def memory_mounts() -> list[Mount]:
    """The writable tmpfs and ramfs mounts this process sees (/proc/self/mountinfo), where files are memory."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as listing:
        for line in listing:
            mount, _, file_system = line.partition(" - ")
            fields, kinds = mount.split(), file_system.split()
            if len(fields) < 6 or len(kinds) < 3 or kinds[0] not in ("tmpfs", "ramfs"):
                continue
            if "ro" in fields[5].split(",") or "ro" in kinds[2].split(","):
                continue
            major, _, minor = fields[2].partition(":")
            path = re.sub(r"\\([0-7]{3})", lambda code: chr(int(code[1], 8)), fields[4])  # a space is \040
            found.append(Mount(path, os.makedev(int(major), int(minor))))
    return found


def _internal_device() -> int | None:
    """The device of the kernel's own shared-memory mount, where memfds, shared anonymous mappings and System V
    segments live: read from a memfd of our own."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.memfd_create("grader-probe")
        try:
            return os.fstat(fd).st_dev
        finally:
            os.close(fd)
    return None


def segments() -> list[tuple[int, int, int, float]]:
    """The System V shared-memory segments: (id, uid, resident bytes, ctime) each (/proc/sysvipc/shm)."""
    found = []
    with contextlib.suppress(OSError), open("/proc/sysvipc/shm", encoding="utf-8") as listing:
        names = listing.readline().split()
        for line in listing:
            row = dict(zip(names, line.split(), strict=False))
            with contextlib.suppress(KeyError, ValueError):
                found.append((int(row["shmid"]), int(row["uid"]), int(row["rss"]) + int(row.get("swap", 0)),
                              float(row["ctime"])))
    return found


def remove_segments(*, uid: int, keep: frozenset[int] = frozenset()) -> None:
    """Remove `uid`'s System V segments but `keep` (those that were there before): a segment outlives every
    process, and its memory stays until it is removed (Linux; nothing elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    mine = [number for number, owner, _, _ in segments() if owner == uid and number not in keep]
    if not mine:
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        for number in mine:
            libc.shmctl(ctypes.c_int(number), ctypes.c_int(IPC_RMID), None)


class SharedMemory:
    """What the processes of one sandbox's workers hold in shared memory, read from outside (see the module)."""

    def __init__(self, uid: int, *, own: bool, files: int) -> None:
        """`uid` runs the workers; `own` when it is the grader's own, so that only what changed since `restart`
        counts; more than `files` files of theirs is more than the watcher can afford to walk: past any limit."""
        self.uid = uid
        self.own = own
        self.files = files
        self._internal = _internal_device()
        self._lock = threading.Lock()  # two workers' watchers may read at once
        self._walks: dict[Mount, _Walk] = {}
        self._since, self._before = self._now()

    @classmethod
    def for_worker(cls, uid: int | None, *, files: int) -> SharedMemory | None:
        """The measure for workers run as `uid` (None: the grader's own), on Linux; None elsewhere."""
        if not sys.platform.startswith("linux"):
            return None
        own = os.geteuid()
        return cls(own if uid is None else uid, own=uid in (None, own), files=files)

    def restart(self) -> None:
        """A new submission's grading starts: of the grader's own uid's files, those changed from now on count."""
        with self._lock:
            self._since, self._before = self._now()
            self._walks.clear()

    @staticmethod
    def _now() -> tuple[float, dict[Mount, int]]:
        """The time to count changes from, and how much of each mount was in use then."""
        before = {}
        for mount in memory_mounts():
            with contextlib.suppress(OSError):
                before[mount] = _used(mount.path)
        return time.time() - CTIME_SLACK_S, before

    def held(self, tree: list[psutil.Process]) -> int:
        """Bytes of shared memory the workers hold (HIDDEN where they hide it), each object counted once."""
        with self._lock:
            objects: dict[tuple[int, int], int] = {}
            mounts = memory_mounts()
            hidden = False
            for mount in mounts:
                walk = self._walk(mount)
                hidden = hidden or walk.too_many
                if not walk.closed:
                    objects.update(walk.files)
                    continue
                with contextlib.suppress(OSError):  # what the mount grew by since grading started bounds it
                    grown = _used(mount.path) - self._before.get(mount, 0)
                    objects[(mount.device, -1)] = max(grown, sum(walk.files.values()))
                    hidden = hidden or os.statvfs(mount.path).f_blocks == 0  # a ramfs reports no use to bound it
            devices = {mount.device for mount in mounts} | {self._internal}
            for process in tree:
                hidden = self._held_by(process, devices, objects) or hidden
            for number, owner, size, changed in segments():
                if owner == self.uid and (not self.own or changed >= self._since - 1):  # whole seconds
                    objects.setdefault((self._internal or -1, number), size)  # a segment's inode number is its id
            return HIDDEN if hidden else sum(objects.values())

    def _walk(self, mount: Mount) -> _Walk:
        """The files of `mount` that count, walked again only when its blocks or inodes in use changed."""
        try:
            usage = os.statvfs(mount.path)
        except OSError:
            return _Walk()
        use = (usage.f_blocks - usage.f_bfree, usage.f_files - usage.f_ffree)
        last = self._walks.get(mount)
        if last is not None and last.use == use and usage.f_blocks:  # a ramfs reports no use at all: walked each time
            return last
        walk = _Walk(use)
        pending, seen = [mount.path], 0
        while pending and not walk.too_many:
            folder = pending.pop()
            try:
                entries = list(os.scandir(folder))
            except PermissionError:
                walk.closed = walk.closed or self._counts(folder)
                continue
            except OSError:
                continue
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_dev != mount.device:
                    continue  # another mount on top: walked as itself if it is memory
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                elif stat.S_ISREG(info.st_mode) and self._owned(info):
                    walk.files[(info.st_dev, info.st_ino)] = info.st_blocks * 512
                    seen += 1
                    walk.too_many = seen > self.files
        self._walks[mount] = walk
        return walk

    def _owned(self, info: os.stat_result) -> bool:
        return info.st_uid == self.uid and (not self.own or info.st_ctime >= self._since)

    def _counts(self, path: str) -> bool:
        try:
            return self._owned(os.stat(path, follow_symlinks=False))
        except OSError:
            return False

    def _held_by(self, process: psutil.Process, devices: set[int | None],
                 objects: dict[tuple[int, int], int]) -> bool:
        """Add the shared-memory objects `process` holds open or mapped to `objects`; whether it hides them."""
        base = f"/proc/{process.pid}"
        try:
            descriptors = os.listdir(f"{base}/fd")
            with open(f"{base}/maps", encoding="utf-8", errors="replace") as listing:
                maps = listing.readlines()
        except FileNotFoundError:
            return False  # gone
        except PermissionError:  # it made itself undumpable: a grader of its own uid cannot look
            return trees.running(process)
        except OSError:
            return False
        for name in descriptors:
            with contextlib.suppress(OSError):
                info = os.stat(f"{base}/fd/{name}")
                if info.st_dev in devices and stat.S_ISREG(info.st_mode):
                    objects[(info.st_dev, info.st_ino)] = info.st_blocks * 512
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 5 or fields[1][3:] != "s" or fields[4] == "0":
                continue
            major, _, minor = fields[3].partition(":")
            with contextlib.suppress(ValueError):
                key = (os.makedev(int(major, 16), int(minor, 16)), int(fields[4]))
                if key[0] not in devices or key in objects:
                    continue
                try:  # root only (CAP_SYS_ADMIN)
                    objects[key] = os.stat(f"{base}/map_files/{fields[0]}").st_blocks * 512
                except OSError:
                    start, _, end = fields[0].partition("-")
                    objects[key] = int(end, 16) - int(start, 16)
        return False
