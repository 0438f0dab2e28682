"""Wall time of `grader check ... --submission solutions` against `python -c "import torch"`.

All commands run alternately in one session, so they see the same machine load; medians are
compared as ratios against the torch import. Goals: `attention` alone at most 2x (issue 2); the
first five exercises at most 6x (issue 3). Rows whose tests are not installed yet are skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS: list[tuple[tuple[str, ...], float]] = [
    (("attention",), 2.0),
    (("attention", "masking", "head_attention", "multi_head_attention", "positional_encoding"), 6.0),
]


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - started


def installed(exercises: tuple[str, ...]) -> bool:
    return all((ROOT / "tests" / "public" / f"test_{name}.py").is_file() for name in exercises)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    commands = {"python -c 'import torch'": ([sys.executable, "-c", "import torch"], None)}
    for exercises, goal in ROWS:
        if installed(exercises):
            label = f"grader check {' '.join(exercises) if len(exercises) < 3 else f'<{len(exercises)} exercises>'}"
            commands[label] = ([sys.executable, "-m", "grader", "check", *exercises, "--submission", "solutions"], goal)
    for command, _ in commands.values():
        wall(command)  # warm the file cache
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(rounds):
        for label, (command, _) in commands.items():
            times[label].append(wall(command))
    baseline = statistics.median(times["python -c 'import torch'"])
    for label, (_, goal) in commands.items():
        median = statistics.median(times[label])
        verdict = "" if goal is None else f"  ratio {median / baseline:5.2f}x (goal: at most {goal:g}x)"
        print(f"{label:42s} median {median:6.2f} s over {rounds} runs{verdict}")


if __name__ == "__main__":
    main()
