"""`session` ties one submission to one worker for a whole grading run."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import submission as submissions
from .sandbox import Limits, WorkerProcess, bwrap_problem
from .selection import kit_root

if TYPE_CHECKING:
    from .remote import Connection, Submission


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA is not available on this machine: use --device cpu or --device auto")
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}: use auto, cpu or cuda")
    return requested


@dataclass
class GradingSession:
    path: Path
    submission: submissions.Submission
    device: str
    limits: Limits
    isolated: bool
    stage_dir: Path
    connection: Connection
    opened_at: float = field(default_factory=time.monotonic)

    @classmethod
    def open(cls, path: Path, *, device: str = "auto", limits: Limits | None = None) -> GradingSession:
        """Load and stage the submission, and start its worker at once so it warms up meanwhile."""
        opened_at = time.monotonic()
        limits = limits or Limits.from_environment()
        loaded = submissions.load(path)
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"unknown device {device!r}: use auto, cpu or cuda")
        isolated = bwrap_problem() is None
        stage_dir = Path(tempfile.mkdtemp(prefix="grader-"))
        try:
            submissions.stage(loaded, kit_root=kit_root(), into=stage_dir)

            def start() -> WorkerProcess:
                return WorkerProcess(stage_dir, device=device, limits=limits, isolate=isolated)

            first = start()  # before torch is imported here: the two imports then overlap
            try:
                device = resolve_device(device)
                from . import protocol
                from .remote import Connection

                protocol.preflight()
            except BaseException:
                first.kill()
                raise
            connection = Connection(start, limits, missing_files=loaded.missing, process=first, generation=1)
        except BaseException:
            shutil.rmtree(stage_dir, ignore_errors=True)
            raise
        return cls(path, loaded, device, limits, isolated, stage_dir, connection, opened_at)

    def impl(self) -> Submission:
        from .remote import Submission

        return Submission(self.connection)

    def close(self) -> None:
        self.connection.close()
        shutil.rmtree(self.stage_dir, ignore_errors=True)
