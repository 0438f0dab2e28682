"""`jobs` is what a batch and its slots say to each other, a Job per submission and an Outcome per job, and what the
batch keeps of each submission: its Entry (an id and a path) and its Result (how its grading ended, and its report).

The bottom of batch/: every other module of it uses these, and this one imports none of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

# A report as the slot's child writes it and DIR/<id>.json keeps it (docs/contract.md#the-json-report): plain JSON.
ReportJSON = dict[str, Any]


class Status(StrEnum):
    """How a submission's grading ended, as its report names it (grades.csv and summary.json: summary.CSV_STATUS)."""

    GRADED = "graded"
    SKIPPED = "skipped"  # the batch's own: graded before with the same key, its report reused
    TIMEOUT = "timeout"
    REFUSED = "refused"  # the submission could not be read (not a zip, no exercise files)
    FAILED = "failed"  # the grader broke, not the submission
    CANCELLED = "cancelled"  # `grader watch`'s own: a newer save replaced the check; a batch never cancels


@dataclass(frozen=True)
class Isolation:
    """What every slot's sandbox needs: folders kept from it, the tier asked for (auto, user or none: GRADER_SANDBOX
    where `grader batch` runs), and whether a weak tier may grade (see `tiers`)."""

    secrets: list[str] = field(default_factory=list)
    protect: str = ""
    allow_unisolated: bool = False
    sandbox: str = "auto"


@dataclass(frozen=True)
class Job:
    """One submission to grade, sent as one JSON line. The slot works in the kit's folder: every path is absolute."""

    path: str
    report: str  # where the slot's child writes the report, in a folder that exists (never made again)
    exercises: list[str]
    suite: str
    timeout_s: float
    isolation: Isolation
    quick: bool = False  # `--quick`: the slow tests are skipped
    budget_s: float | None = None  # `grader check --timeout`: tests past it fail with "time budget used up"
    failures: str = ""  # where the child appends each failure as it happens, one JSON line each (watch)
    # The submission as intake read it on the batch's machine (`Submission.to_json`): a cluster worker grades it
    # without reading `path`, which is the batch's and only names the submission in its report.
    intake: dict[str, Any] | None = None
    salt: str = ""  # the course's salt (GRADER_SALT), of which the grading's seed is derived (grader.host.seeds)
    # The language of the report's feedback, and the worker's limits (`Limits.to_json`; {}: the defaults): the
    # batch's own, carried to every slot and cluster worker with the job, never through their environment.
    language: str = "en"
    limits: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(**{**data, "isolation": Isolation(**data["isolation"])})


@dataclass(frozen=True)
class Outcome:
    """How a job ended in its slot, sent back as one JSON line; a graded job's report is in the Job's `report` file."""

    status: Status
    reason: str = ""
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(Status(data["status"]), data.get("reason") or "", data.get("seconds"))


# DIR/grades.csv and DIR/summary.json: no submission's report may take or shadow their names.
RESERVED_IDS = frozenset({"grades", "summary"})
# The statuses a report is written with (see `schedule._grade`); never "skipped", which is a rerun's word for it.
RECORDED = (Status.GRADED, Status.REFUSED, Status.TIMEOUT, Status.FAILED)


@dataclass(frozen=True)
class Entry:
    """A submission of the batch: a sub-folder or .zip of SUBMISSIONS_DIR."""

    id: str  # safe as a file name and in a spreadsheet, unique in the batch (see `discover`)
    path: Path


@dataclass(frozen=True)
class Result:
    """How a submission's grading ended, and its report."""

    id: str
    status: Status
    report: ReportJSON

    @property
    def ended(self) -> Status:
        """How its grading ended: for one skipped as done, the status its report was recorded with.

        A rerun's grades.csv, summary and exit code follow this, so that they are an uninterrupted run's.
        """
        if self.status != Status.SKIPPED:
            return self.status
        recorded = self.report.get("status")
        return next((status for status in RECORDED if status == recorded), Status.GRADED)
