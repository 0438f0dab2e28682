"""Wall time of `grader check attention --submission solutions` against `python -c "import torch"`.

Both are run alternately in one session, so they see the same machine load; the medians are
compared as a ratio. Goal (issue 2): at most 2x.
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


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    baseline_cmd = [sys.executable, "-c", "import torch"]
    grader_cmd = [sys.executable, "-m", "grader", "check", "attention", "--submission", "solutions"]
    wall(baseline_cmd), wall(grader_cmd)  # warm the file cache
    baseline, grading = [], []
    for _ in range(rounds):
        baseline.append(wall(baseline_cmd))
        grading.append(wall(grader_cmd))
    b, g = statistics.median(baseline), statistics.median(grading)
    print(f"python -c 'import torch'                       median {b:6.2f} s  ({rounds} runs)")
    print(f"grader check attention --submission solutions  median {g:6.2f} s  ({rounds} runs)")
    print(f"ratio {g / b:.2f}x (goal: at most 2x)")


if __name__ == "__main__":
    main()
