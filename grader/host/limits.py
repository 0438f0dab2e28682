"""`limits` says what a worker may use, and names the ways a worker or its sandbox fails."""

from __future__ import annotations

import dataclasses

from grader import settings


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one worker may use. Per-call time is enforced here; the rest by rlimits in the worker."""

    call_timeout_s: float = 20.0
    start_timeout_s: float = 120.0
    memory_bytes: int = 4 * 2**30
    cpu_seconds: int = 1800
    file_size_bytes: int = 64 * 2**20
    output_bytes: int = 64 * 1024
    scratch_bytes: int = 256 * 2**20  # /tmp and /dev/shm together (bubblewrap), or the scratch folder (watched)
    tasks: int = 256  # threads of one worker
    inodes: int = 65536  # files and folders in the scratch tmpfs mounts together
    health_timeout_s: float = 10.0  # for the zygote to answer between two submissions

    def to_json(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, float | int]) -> Limits:
        """Limits a job carries (`to_json`); a field it does not name keeps its default."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in names})

    @classmethod
    def from_environment(cls) -> Limits:
        """Defaults, overridden by GRADER_MEMORY_LIMIT_MB, GRADER_CALL_TIMEOUT_S and GRADER_SCRATCH_MB where set."""
        limits = cls()
        given = settings.limits()
        memory = given.get("GRADER_MEMORY_LIMIT_MB")
        timeout = given.get("GRADER_CALL_TIMEOUT_S")
        scratch = given.get("GRADER_SCRATCH_MB")
        try:
            if memory:
                limits = dataclasses.replace(limits, memory_bytes=int(memory) * 2**20)
            if timeout:
                limits = dataclasses.replace(limits, call_timeout_s=float(timeout))
            if scratch:
                limits = dataclasses.replace(limits, scratch_bytes=int(scratch) * 2**20)
        except ValueError:
            raise ValueError(
                "GRADER_MEMORY_LIMIT_MB and GRADER_SCRATCH_MB must be whole numbers of MiB and GRADER_CALL_TIMEOUT_S"
                " a number of seconds"
            ) from None
        if limits.scratch_bytes < 2**20:
            raise ValueError("GRADER_SCRATCH_MB must be at least 1")
        if limits.memory_bytes - limits.scratch_bytes < MIN_WORKER_MEMORY:
            raise ValueError(f"GRADER_MEMORY_LIMIT_MB must exceed GRADER_SCRATCH_MB by at least "
                             f"{MIN_WORKER_MEMORY // 2**20} MiB (the memory limit covers the scratch space too)")
        return limits

    def rlimits(self, tier: str) -> dict[str, int]:
        # RLIMIT_DATA rather than RLIMIT_AS: torch (and CUDA above all) reserves far more address
        # space than it ever touches, while DATA counts the private writable memory actually mapped;
        # thread stacks count too, so it also bounds how many threads a worker can hold. The scratch
        # tmpfs is memory too: the worker gets what the scratch cap leaves of the memory limit.
        limits = {
            "RLIMIT_DATA": self.memory_bytes - self.scratch_bytes if tier == "bubblewrap" else self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_size_bytes,
            "RLIMIT_CORE": 0,
        }
        if tier != "none":
            # Counted per uid, 65534 in both tiers (see `processes.as_sandbox_user`): as root's uid the
            # kernel would not enforce it.
            limits["RLIMIT_NPROC"] = self.tasks
        return limits


MIN_WORKER_MEMORY = 512 * 2**20  # torch alone maps about 220 MiB of private memory before any tensor


class WorkerGone(Exception):
    """The worker process died, was killed, or broke the protocol."""


class WorkerTimeout(Exception):
    """The worker did not answer in time; it has been killed."""


class WorkerStartError(RuntimeError):
    """The worker or its sandbox never came up or broke down: a problem with the kit or this machine."""


class SandboxUnsafe(WorkerStartError):
    """The sandbox came up but its self-test shows that it does not hold on this machine."""
