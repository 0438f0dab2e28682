"""Wall time of `grader check ... --submission solutions` against `python -c "import torch"`.

All commands run alternately in one session, so they see the same machine load; medians are
compared as ratios against the torch import. Goals: `attention` alone at most 2x (issue 2); the
first five exercises at most 6x (issue 3); the whole curriculum is reported with and without the
capstone (`--quick`) (issue 4), within 4x with it (issue 48). Rows whose tests are not installed yet are skipped.

Every command runs with Python's bytecode cache on, as a user's does: an environment that sets
PYTHONDONTWRITEBYTECODE (some containers do) would otherwise make the kit compile its own sources on every run,
while torch's, compiled when pip installed it, are not.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_FIVE = ("attention", "masking", "head_attention", "multi_head_attention", "positional_encoding")
ALL = (*FIRST_FIVE, "sublayers", "encoder", "decoder", "transformer")
# (label, exercises, extra arguments, goal as a multiple of the torch import, or None to report only)
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "OMP_NUM_THREADS": "1"}
ROWS: list[tuple[str, tuple[str, ...], tuple[str, ...], float | None]] = [
    ("grader check attention", ("attention",), (), 2.0),
    ("grader check <first five exercises>", FIRST_FIVE, (), 6.0),
    ("grader check <all nine> --quick", ALL, ("--quick",), None),
    ("grader check <all nine>", ALL, (), 4.0),
]


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=ENV)
    return time.perf_counter() - started


def installed(exercises: tuple[str, ...]) -> bool:
    return all((ROOT / "tests" / "public" / f"test_{name}.py").is_file() for name in exercises)


def main(rounds: int, device: str = "auto") -> None:
    commands = {"python -c 'import torch'": ([sys.executable, "-c", "import torch"], None)}
    for label, exercises, extra, goal in ROWS:
        if installed(exercises):
            command = [sys.executable, "-m", "grader", "check", *exercises, *extra, "--submission", "solutions",
                       "--device", device]
            commands[label] = (command, goal)
    for command, _ in commands.values():
        wall(command)  # warm the file cache
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(rounds):
        for label, (command, _) in commands.items():
            times[label].append(wall(command))
    baseline = statistics.median(times["python -c 'import torch'"])
    for label, (_, goal) in commands.items():
        median = statistics.median(times[label])
        ratio = "" if label.startswith("python") else f"  ratio {median / baseline:5.2f}x"
        goal_text = "" if goal is None else f" (goal: at most {goal:g}x)"
        print(f"{label:38s} median {median:6.2f} s over {rounds} runs{ratio}{goal_text}")


def capstone_times(seeds: range, variants: list[str], device: str = "auto") -> None:
    """The time to clear the capstone and the share of fresh sequences decoded right, per task seed, with the
    hidden test's own settings: for the reference, and for each correct variant of transformer.py named."""
    path = ROOT / "tests" / "hidden" / "test_transformer.py"
    if not path.is_file():
        return
    import torch

    from grader.inside.shared import capstone

    torch.set_num_threads(1)
    on = torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
    spec = importlib.util.spec_from_file_location("capstone_settings", path)
    settings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(settings)
    models = {"reference": importlib.import_module("solutions.transformer")}
    for variant in variants:  # a transformer.py written against the reference's other exercises
        file = Path(variant).resolve()
        spec = importlib.util.spec_from_file_location(f"solutions.{file.stem}", file)
        models[file.stem] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(models[file.stem])
    for name, module in models.items():
        for seed in seeds:
            _, table, src = settings.draw_task(seed)
            torch.manual_seed(settings.TRAIN_SEED)
            model = module.Transformer(settings.COPY["vocab"], settings.COPY["vocab"], **settings.SIZES).to(on)
            trained = capstone.train_copy(model, table=table, **settings.COPY, seed=settings.TRAIN_SEED)
            decoded = capstone.greedy_copy(model.eval(), src.to(on)).cpu()
            accuracy = (decoded == table[src]).all(dim=1).float().mean().item()
            print(f"capstone, {name}, task seed {seed}: trained {len(trained['losses'])} steps "
                  f"in {trained['seconds']:5.2f} s, decodes {accuracy:.1%} "
                  f"(threshold {settings.THRESHOLD:.0%}, goal for the reference: within 15 s)", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--capstone-only", action="store_true", help="skip the start-up timings")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="graded with --device (the capstone rows train on it too)")
    parser.add_argument("--capstone-seeds", type=int, default=3, help="task seeds 0..N-1 for the capstone rows")
    parser.add_argument("--capstone-variant", action="append", default=[], metavar="FILE",
                        help="also time this transformer.py (repeatable)")
    arguments = parser.parse_args()
    if not arguments.capstone_only:
        main(arguments.rounds, arguments.device)
    capstone_times(range(arguments.capstone_seeds), arguments.capstone_variant, arguments.device)
