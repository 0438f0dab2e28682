"""Time from saving a file to `grader watch`'s feedback, against a cold `grader check` and `import torch`.

For each exercise, one `grader watch EXERCISE` runs for the whole measurement (as a student leaves it
running). Each round saves a wrong version (a known mistake of the catalogue), timing the first
failure line and the complete table, then the right version (the reference), timing its table;
a cold `grader check EXERCISE --quick` of the same files and `python -c "import torch"` run in
between, so that all see the same machine load. Medians, and ratios side by side. Goal (issue 19):
the complete table for `attention` within 0.5 s of the save, and at most 25% of a cold check.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.judge import variants  # noqa: E402 - after the kit's folder is on the path

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "COLUMNS": "160"}
MISTAKES = {"attention": "no_scaling", "multi_head_attention": "no_scaling"}
TIMEOUT_S = 120.0


class Watch:
    """`grader watch EXERCISE` on `folder`, each line it prints timestamped as it arrives."""

    def __init__(self, exercise: str, folder: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader", "watch", exercise, "--submission", str(folder)], cwd=folder.parent,
            env=ENV, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put((time.perf_counter(), line))

    def until(self, text: str) -> float:
        """The time the next line holding `text` arrived."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            arrived, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if text in line:
                return arrived

    def stop(self) -> None:
        self.process.send_signal(2)
        self.process.wait(timeout=30)


def save(path: Path, source: str) -> float:
    """Write `source` as an editor saves: the whole file at once; the time it landed."""
    path.write_text(source)
    return time.perf_counter()


def wall(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(exercise: str, rounds: int, work: Path) -> dict[str, list[float]]:
    folder = work / exercise / "exercises"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__", "mistakes"))
    target = folder / f"{exercise}.py"
    wrong = next(v for v in variants.mistakes(exercise) if v.name == MISTAKES[exercise]).source
    right = (ROOT / "solutions" / f"{exercise}.py").read_text()
    times: dict[str, list[float]] = {"first failure": [], "table (wrong)": [], "table (right)": [],
                                     "cold check": [], "import torch": []}
    watch = Watch(exercise, folder)
    try:
        watch.until("Watching")
        for _ in range(rounds):
            time.sleep(0.3)
            saved = save(target, wrong)
            times["first failure"].append(watch.until("✘") - saved)
            times["table (wrong)"].append(watch.until("Graded in") - saved)
            watch.until("Watching")
            time.sleep(0.3)
            saved = save(target, right)
            times["table (right)"].append(watch.until("Graded in") - saved)
            watch.until("Watching")
            times["cold check"].append(wall([sys.executable, "-m", "grader", "check", exercise, "--quick",
                                             "--submission", str(folder)], cwd=work))
            times["import torch"].append(wall([sys.executable, "-c", "import torch"], cwd=work))
    finally:
        watch.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("exercises", nargs="*", default=list(MISTAKES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="feedback-latency-") as work:
        for exercise in args.exercises:
            times = {name: statistics.median(values) for name, values in measure(exercise, args.rounds,
                                                                                   Path(work)).items()}
            cold, torch_import = times["cold check"], times["import torch"]
            print(f"\n{exercise} (median of {args.rounds} rounds)")
            print(f"{'':22} {'seconds':>8} {'/ cold check':>13} {'/ import torch':>15}")
            for name, seconds in times.items():
                print(f"{name:22} {seconds:8.3f} {seconds / cold:12.0%} {seconds / torch_import:14.2f}x")
            if exercise == "attention":
                table = max(times["table (wrong)"], times["table (right)"])
                verdict = "met" if table <= 0.5 and table <= 0.25 * cold else "NOT met"
                print(f"goal (complete table within 0.5 s of the save and at most 25% of a cold check): {verdict}")


if __name__ == "__main__":
    main()
