"""`backend` is the seam between a grading and the machinery that runs its workers, and the one place that chooses it.

Two backends start workers. Where Linux can fork, a `sandbox.Sandbox` runs a zygote (torch imported once, under
bubblewrap, as another user or as is) whose `workers.Client` forks a `workers.WorkerProcess` per request. Where it
cannot (macOS, Windows, `GRADER_WORKERS=spawn`), a `portable.PortableSandbox` spawns each `spawned.PortableWorker`
as a process of its own through a `portable.PortableClient`. The rest of the grader (the session, the connection,
the batch's slots) names neither: it holds a `WorkerSandbox`, its `WorkerClient` and their `WorkerHandle`s, the
protocols below, which both backends satisfy (tests/kit/test_layout.py checks their members and signatures), and gets
its sandbox from `open_sandbox`, which asks `portable.wanted()` and `tiers` once per sandbox it starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from grader.host import portable, tiers
from grader.host.limits import Limits

if TYPE_CHECKING:
    import torch

    from grader.host.workers import OutputTail
    from grader.intake.submission import Submission


class WorkerHandle(Protocol):
    """One process that imported the submission and answers requests (grader.inside.worker)."""

    limits: Limits
    stdout: OutputTail
    stderr: OutputTail
    hello: dict[str, Any]  # what it said when ready: its own word (warm or not), never a verdict

    @property
    def pid(self) -> int | None: ...

    @property
    def ready(self) -> bool: ...

    def wait_ready(self) -> dict[str, Any]: ...

    def exchange(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *,
                 timeout_s: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]: ...

    def kill(self, *, wait: bool = True) -> None: ...


class WorkerClient(Protocol):
    """One submission's link to a sandbox: new workers on request, warm-up, and the end of them all."""

    def spawn(self, *, memory_above: int | None = None) -> WorkerHandle: ...

    def warm(self) -> None: ...

    def close(self) -> None: ...


class WorkerSandbox(Protocol):
    """Where workers run: its isolation tier and limits, what its self-test found a worker could do, and whether it
    can keep a test's memory budget (`bounds_memory`); `connect` hands it the next submission."""

    limits: Limits
    tier: str
    isolated: bool
    exposed: tuple[str, ...] | list[str]
    reasons: tuple[str, ...]  # why no stronger tier: what `tiers.choose` said when it was opened
    bounds_memory: bool

    def alive(self) -> bool: ...

    def problem(self) -> str: ...

    def check_self_test(self) -> None: ...

    def connect(self, submission: Submission) -> WorkerClient: ...

    def close(self) -> None: ...


def open_sandbox(*, device: str, limits: Limits, protect: str = "", allow_unisolated: bool = False,
                 sandbox: str | None = None) -> WorkerSandbox:
    """A sandbox of the strongest tier that works here, has not failed its self-test and `sandbox` (the tier asked
    for: auto, user or none; None: this process's GRADER_SANDBOX) leaves, from the backend this machine has: the
    zygote's where it can fork, else spawned workers' (whose tier is `none`).

    A sandbox that fails its self-test says so when its first worker is awaited (SandboxUnsafe); from then on
    `tiers.choose()` names why, and the next sandbox opened is of a weaker tier. IsolationRefused when that is `none`
    and there is something to `protect` (see `tiers`).
    """
    choice = tiers.refuse_unless_isolated(why=protect, allowed=allow_unisolated, wanted=sandbox)
    opened: WorkerSandbox
    if portable.wanted():
        opened = portable.PortableSandbox(device=device, limits=limits)
    else:
        from grader.host.sandbox import Sandbox

        opened = Sandbox(device=device, limits=limits, tier=choice.tier)
    opened.reasons = choice.reasons
    return opened
