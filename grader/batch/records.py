"""`records` writes what a batch keeps of each submission, DIR/<id>.json: its own report, or one that says why
it was not graded. A local batch and a cluster batch (`cluster`) write them alike."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from grader.batch.jobs import Entry, Outcome, ReportJSON, Result, Status
from grader.batch.summary import excerpt
from grader.curriculum import BY_ID
from grader.grade.reports import SCHEMA, write_json
from grader.grade.selection import Selection
from grader.lang import tr
from grader.text import clean

MAX_REASON_CHARACTERS = 2000  # of why a submission was not graded: a zip of 400 long names is no essay


def recorded(entry: Entry, selection: Selection, report_key: str, outcome: Outcome, report: ReportJSON | None,
              out: Path, device: str) -> Result:
    """The submission's report as the batch keeps it, written to DIR/<id>.json: a graded one's own report, or
    one that says why it was not graded."""
    if outcome.status == Status.GRADED and contract_shaped(report):
        status = Status.GRADED
    else:
        status = outcome.status if outcome.status in (Status.REFUSED, Status.TIMEOUT) else Status.FAILED
        report = empty_report(entry, selection, device, outcome.reason or tr("the report is missing"))
    report.update({"id": entry.id, "submission_name": clean(entry.path.name, newlines=False), "key": report_key,
                   "status": status})
    write_json(report, out / f"{entry.id}.json")
    return Result(entry.id, status, report)


def read(path: Path) -> ReportJSON | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if contract_shaped(data) else None


def contract_shaped(report: object) -> bool:
    return isinstance(report, dict) and report.get("schema") == SCHEMA


def empty_report(entry: Entry, selection: Selection, device: str, reason: str) -> ReportJSON:
    """A contract-shaped report for a submission that could not be graded: 0 everywhere, and why.

    The reason may quote the submission (a zip's entries, an exception): it is cleaned and cut to
    MAX_REASON_CHARACTERS, and names the submission by its file name, not by the folder it was graded from."""
    reason = excerpt(clean(reason.replace(str(entry.path), entry.path.name)), MAX_REASON_CHARACTERS)
    exercises = [
        {"id": exercise_id, "score": 0.0, "max_score": float(BY_ID[exercise_id].points), "blocked_by": [],
         "tests": [{"name": f"{exercise_id} (not graded)", "outcome": "error", "points": 0.0,
                    "max_points": float(BY_ID[exercise_id].points), "message": reason, "seed": None}]}
        for exercise_id in selection.exercises
    ]
    device, torch_version = _runtime(device)
    return {"schema": SCHEMA, "submission": clean(str(entry.path), newlines=False), "suite": selection.suite,
            "device": device, "score": 0.0, "max_score": sum(e["max_score"] for e in exercises), "duration_s": 0.0,
            "torch": torch_version, "sandbox": "", "warnings": [reason], "exercises": exercises}


@functools.cache
def _runtime(requested: str) -> tuple[str, str]:
    """The device and torch version the slots grade with, as a graded report names them (`auto` resolved).

    Only a submission that was not graded needs them here, so only then does this process import torch."""
    import torch

    from grader.host.session import resolve_device

    try:
        return resolve_device(requested), torch.__version__
    except ValueError:
        return requested, torch.__version__


REMOVED_FOLDER = "removed"  # DIR/removed/: the reports of submissions no longer in SUBMISSIONS_DIR


def move_aside(out: Path, ids: set[str]) -> list[str]:
    """Move the reports in `out` of submissions not among `ids` (`<id>.json`, and `feedback/<id>.txt`) into
    `out/removed/`, so that grades.csv, the summary and the folder agree on who is in the class; their ids, sorted."""
    gone = sorted(path.stem for path in out.glob("*.json")
                  if path.stem not in ids and path.name != "summary.json" and read(path) is not None)
    if gone:
        aside = out / REMOVED_FOLDER
        aside.mkdir(exist_ok=True)
        for name in gone:
            (out / f"{name}.json").replace(aside / f"{name}.json")
            feedback = out / "feedback" / f"{name}.txt"
            if feedback.is_file():
                feedback.replace(aside / f"{name}.txt")
    return gone
