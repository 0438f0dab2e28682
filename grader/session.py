"""`session` ties one submission to one worker for a whole grading run."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from . import submission as submissions
from .remote import Connection, Submission
from .sandbox import Limits, WorkerProcess, bwrap_problem


def kit_root() -> Path:
    """The folder holding exercises/, tests/ and (for instructors) solutions/."""
    return Path(__file__).resolve().parent.parent


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA is not available on this machine: use --device cpu or --device auto")
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}: use auto, cpu or cuda")
    return requested


@dataclass
class GradingSession:
    submission: submissions.Submission
    device: str
    limits: Limits
    isolated: bool
    stage_dir: Path
    connection: Connection

    @classmethod
    def open(cls, path: Path, *, device: str = "auto", limits: Limits | None = None) -> GradingSession:
        """Load and stage the submission, and start its worker at once so it warms up meanwhile."""
        limits = limits or Limits()
        loaded = submissions.load(path)
        device = resolve_device(device)
        isolated = bwrap_problem() is None
        stage_dir = Path(tempfile.mkdtemp(prefix="grader-"))
        try:
            submissions.stage(loaded, kit_root=kit_root(), into=stage_dir)
        except BaseException:
            shutil.rmtree(stage_dir, ignore_errors=True)
            raise

        def start() -> WorkerProcess:
            return WorkerProcess(stage_dir, device=device, limits=limits, isolate=isolated)

        connection = Connection(start, limits, missing_files=loaded.missing)
        connection.ensure_started()
        return cls(loaded, device, limits, isolated, stage_dir, connection)

    def impl(self) -> Submission:
        return Submission(self.connection)

    def close(self) -> None:
        self.connection.close()
        shutil.rmtree(self.stage_dir, ignore_errors=True)
