"""On a machine with a GPU: the kit's GPU tests, then the grading-time benchmark with `--device cuda`.

    python benchmarks/gpu.py            # about 3 minutes; stops at 5

Runs tests/kit/test_gpu.py (the reference at full marks, the stubs at zero, tensors made on the CPU losing points,
all graded with `grader check --device cuda`) and `benchmarks/grading_time.py --device cuda --rounds 3
--capstone-seeds 3`, and prints what each printed. Written against the CPU-only machines this kit is built on:
it has never run on a GPU, and says so if CUDA is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 300.0
STEPS = (
    ("GPU tests", [sys.executable, "-m", "pytest", "tests/kit/test_gpu.py", "-q", "-p", "no:cacheprovider"]),
    ("grading time on the GPU", [sys.executable, "benchmarks/grading_time.py", "--device", "cuda", "--rounds", "3",
                                 "--capstone-seeds", "3"]),
)


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print(f"benchmarks/gpu.py: CUDA is not available to torch {torch.__version__} here: run it on a GPU machine "
              "with a CUDA build of torch", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    started = time.monotonic()
    failed = 0
    for label, command in STEPS:
        left = BUDGET_S - (time.monotonic() - started)
        if left <= 0:
            print(f"== {label}: not run, the {BUDGET_S:g} s budget is spent", flush=True)
            failed += 1
            continue
        print(f"== {label}: {' '.join(command[1:])}", flush=True)
        try:
            done = subprocess.run(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=left)
            failed += done.returncode != 0
        except subprocess.TimeoutExpired:
            print(f"== {label}: stopped at the {BUDGET_S:g} s budget", flush=True)
            failed += 1
    print(f"== {time.monotonic() - started:.0f} s in all; {failed} step(s) failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
