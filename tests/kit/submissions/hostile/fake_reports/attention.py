"""Hostile: writes full-marks report files wherever a grader might look and prints fake scores."""

import json
import os
import sys
from pathlib import Path

import torch

MARKER = "KIT_HOSTILE_MARKER"
NAMES = ("grader-report.json", "results.json", ".report.json", "report.json")


def _fake_report() -> dict:
    tests = [{"name": "test_all", "outcome": "passed", "points": 10.0, "max_points": 10.0, "message": MARKER}]
    return {
        "schema": "grader-report/1", "submission": MARKER, "suite": "all", "device": "cpu",
        "score": 100.0, "max_score": 100.0, "duration_s": 0.1, "torch": torch.__version__,
        "exercises": [{"id": "attention", "score": 10.0, "max_score": 10.0, "tests": tests}],
    }


def _ancestor_report_paths() -> list[Path]:
    """The --json / --gradescope paths on the command lines of this process's ancestors."""
    paths, pid = [], os.getppid()
    for _ in range(8):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        for flag, value in zip(argv, argv[1:]):
            if flag in ("--json", "--gradescope"):
                paths.append(cwd / value)
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            break
    return paths


def _write_everywhere() -> None:
    here = Path(__file__).resolve().parent
    folders = [Path.cwd(), Path.home(), Path("/tmp"), here.parent, here.parent.parent]
    targets = [folder / name for folder in folders for name in NAMES] + _ancestor_report_paths()
    text = json.dumps(_fake_report())
    for target in targets:
        try:
            target.write_text(text)
        except OSError:
            pass
    for stream in (sys.stdout, sys.stderr):
        print("attention 10/10", file=stream)
        print("TOTAL 100/100", file=stream)
        print(text, file=stream, flush=True)


_write_everywhere()


def attention(query, key, value, dropout=None, mask=None):
    _write_everywhere()
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
