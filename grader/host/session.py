"""`session` ties one submission to its workers for a whole grading run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from grader.curriculum import SUBMISSION_FILES
from grader.host import seeds, tiers
from grader.host.backend import WorkerClient, WorkerHandle, WorkerSandbox, open_sandbox
from grader.host.limits import Limits
from grader.host.scratch import remove_stale_stages
from grader.intake import submission as submissions
from grader.intake.imports import exercise_imports

if TYPE_CHECKING:
    from grader.host.connection import Connection
    from grader.host.remote import RemoteSubmission


def refuse_unavailable_device(requested: str) -> None:
    """ValueError at once, before any sandbox starts or torch is imported, when `requested` is cuda and
    this machine surely has none: a CPU-only torch build, or no GPU driver. Other cases wait for torch."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}: use auto, cpu or cuda")
    if requested != "cuda":
        return
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return
    if version.endswith("+cpu"):
        why = f"torch {version} is a CPU-only build"
    elif not any(Path(device).exists() for device in ("/dev/nvidiactl", "/dev/kfd", "/proc/driver/nvidia")):
        why = "no GPU driver is loaded"
    else:
        return
    raise ValueError(f"CUDA is not available on this machine ({why}): use --device cpu or --device auto")


def resolve_device(requested: str) -> str:
    refuse_unavailable_device(requested)
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA is not available on this machine: use --device cpu or --device auto")
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}: use auto, cpu or cuda")
    return requested


def start_sandbox(loaded: submissions.Submission, *, device: str, limits: Limits, protect: str = "",
                  allow_unisolated: bool = False) -> tuple[WorkerSandbox, WorkerClient]:
    """A sandbox connected to `loaded` (`backend.open_sandbox`: the strongest tier that works here)."""
    sandbox = open_sandbox(device=device, limits=limits, protect=protect, allow_unisolated=allow_unisolated)
    try:
        return sandbox, sandbox.connect(loaded)
    except BaseException:
        sandbox.close()
        raise


@dataclass
class Workers:
    """Starts one submission's workers from a sandbox's zygote; starts a sandbox of its own if that one was killed."""

    submission: submissions.Submission
    device: str
    sandbox: WorkerSandbox
    client: WorkerClient
    owned: list[WorkerSandbox] = field(default_factory=list)
    protect: str = ""  # what an unisolated sandbox would expose (refused then), see `tiers`
    allow_unisolated: bool = False
    warm_wanted: bool = False  # tests that need a warm worker were collected: every sandbox is asked to warm up

    def want_warm(self) -> None:
        """Have the sandbox warm up (grader.inside.zygote), and any sandbox started after it."""
        if not self.warm_wanted:
            self.warm_wanted = True
            self.client.warm()

    def start(self, *, fresh: bool = False, memory_above: int | None = None) -> WorkerHandle:
        """A new worker; in a new sandbox when the current one died, or when `fresh`. With `memory_above`, a worker
        whose memory may grow that many bytes above its zygote's (only where `bounds_memory`)."""
        if fresh or not self.sandbox.alive():
            self.client.close()
            self.sandbox, self.client = start_sandbox(self.submission, device=self.device, limits=self.sandbox.limits,
                                                      protect=self.protect, allow_unisolated=self.allow_unisolated)
            self.owned.append(self.sandbox)
            worker = self.client.spawn(memory_above=memory_above)
            if self.warm_wanted:
                self.client.warm()
            return worker
        return self.client.spawn(memory_above=memory_above)

    @property
    def used(self) -> list[WorkerSandbox]:
        """Every sandbox this submission's workers ran in: the current one, and those it started (or was given)."""
        return list(dict.fromkeys([self.sandbox, *self.owned]))

    def close(self) -> None:
        self.client.close()
        for sandbox in self.owned:
            sandbox.close()


@dataclass
class GradingSession:
    path: Path
    submission: submissions.Submission
    device: str
    limits: Limits
    workers: Workers
    connection: Connection
    opened_at: float = field(default_factory=time.monotonic)
    seed: int = 0  # every draw of the grading comes from it (grader.host.seeds)

    @classmethod
    def open(cls, path: Path, *, device: str = "auto", limits: Limits | None = None, protect: str = "",
             allow_unisolated: bool = False, seed: int | None = None, salt: str = "") -> GradingSession:
        """Load the submission and start its sandbox at once, so it warms up while we import torch.

        `protect` says what the run exposes if unisolated (the hidden tests, the solutions): then a
        sandbox of the `none` tier is refused (IsolationRefused) unless `allow_unisolated`. The grading's
        seed is `seed`, or else derived from the submission's files and `salt` (grader.host.seeds).
        """
        opened_at = time.monotonic()
        refuse_unavailable_device(device)
        limits = limits or Limits.from_environment()
        loaded = submissions.load(path)
        remove_stale_stages()
        sandbox, client = start_sandbox(loaded, device=device, limits=limits, protect=protect,
                                        allow_unisolated=allow_unisolated)
        try:
            session = cls.around(path, loaded, sandbox, client, device=device, opened_at=opened_at, seed=seed,
                                 salt=salt)
            session.workers.protect, session.workers.allow_unisolated = protect, allow_unisolated
        except BaseException:
            sandbox.close()
            raise
        session.workers.owned.append(sandbox)
        return session

    @classmethod
    def around(cls, path: Path, loaded: submissions.Submission, sandbox: WorkerSandbox, client: WorkerClient, *,
               device: str, opened_at: float | None = None, seed: int | None = None, salt: str = "") -> GradingSession:
        """A session on a sandbox already connected to `loaded`; asks for its first worker at once."""
        workers = Workers(loaded, device, sandbox, client)
        first = workers.start()
        try:
            device = resolve_device(device)
            from grader.host.connection import Connection
            from grader.inside.shared import protocol

            protocol.preflight()
        except BaseException:
            first.kill()
            workers.close()
            raise
        imports = exercise_imports(loaded.files, [file.removesuffix(".py") for file in SUBMISSION_FILES])
        connection = Connection(workers.start, sandbox.limits, restart=partial(workers.start, fresh=True),
                                missing_files=loaded.missing, unparsed_files=loaded.unparsed, imports=imports,
                                process=first, generation=1)
        return cls(path, loaded, device, sandbox.limits, workers, connection,
                   opened_at if opened_at is not None else time.monotonic(),
                   seed if seed is not None else seeds.grading_seed(loaded.files, salt=salt))

    @property
    def tier(self) -> str:
        """The weakest tier any of this run's sandboxes had."""
        return max((sandbox.tier for sandbox in self.workers.used), key=tiers.TIERS.index)

    def exposed(self) -> list[str]:
        """What the self-tests of this run's sandboxes of its weakest tier found a worker could do (only the
        `none` tier goes on; a stronger sandbox that failed is named in the warning on the tier)."""
        weakest = [s for s in self.workers.used if s.tier == self.tier]
        return list(dict.fromkeys(what for sandbox in weakest for what in sandbox.exposed))

    def reasons(self) -> tuple[str, ...]:
        """Why no stronger tier than this run's weakest: what its sandbox of that tier was opened with."""
        return next((sandbox.reasons for sandbox in self.workers.used if sandbox.tier == self.tier), ())

    def impl(self) -> RemoteSubmission:
        from grader.host.remote import RemoteSubmission

        return RemoteSubmission(self.connection)

    def close(self) -> None:
        # A bubblewrap sandbox of this session's own dies whole with its PID namespace in workers.close(): no need
        # to wait for its worker first (0.4 s of a `grader check`). Elsewhere the zygote kills the worker's tree first.
        sandbox = self.workers.sandbox
        self.connection.close(wait=not (sandbox in self.workers.owned and sandbox.tier == "bubblewrap"))
        self.workers.close()
