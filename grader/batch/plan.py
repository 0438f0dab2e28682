"""`Plan`: a batch's fixed options, built once from the command line (`grader batch`) and handed down to the schedule,
its local slots and the Dask cluster, in place of a parameter each; `GradeAll`: how the schedule has its submissions
graded by either.

Next to `jobs` at the bottom of batch/: it imports none of batch's other modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader.batch.jobs import Entry, Isolation, Result
from grader.grade.selection import Selection
from grader.host.limits import Limits


@dataclass(frozen=True)
class Plan:
    """What every submission of a batch is graded with, and where its reports go.

    `jobs` local slots grade at once, unless `cluster` names a Dask scheduler (an address, or local:N) whose workers
    grade instead; a scheduler's address without TLS is refused unless `insecure_cluster` (--insecure-cluster).
    `isolation` goes to every slot with each job, and so do `language` (the feedback's) and `limits` (the workers');
    `salt` (GRADER_SALT) goes into every grading's seed; `force` grades again what an earlier run of the batch graded
    with the same key.
    """

    out: Path
    selection: Selection
    device: str
    timeout_s: float
    jobs: int = 1
    force: bool = False
    isolation: Isolation = field(default_factory=Isolation)
    cluster: str | None = None
    insecure_cluster: bool = False
    salt: str = ""
    language: str = "en"
    limits: Limits = field(default_factory=Limits)


class GradeAll(Protocol):
    """What grades a batch's submissions for the schedule: its local slots (`schedule`) or a Dask cluster's workers
    (`cluster.run`). It grades every entry of `todo` as `plan` says, writes its DIR/<id>.json under the key `keys`
    gives it, and calls `record` with its Result, once per entry, as each is done; `say` tells the instructor what
    the batch should know (a worker refused, a worker lost)."""

    def __call__(self, plan: Plan, todo: list[Entry], keys: dict[str, str], record: Callable[[Result], None],
                 say: Callable[[str], None]) -> None: ...
