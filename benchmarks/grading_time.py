"""Wall time of `grader check ... --submission solutions` against `python -c "import torch"`.

All commands run alternately in one session, so they see the same machine load; medians are
compared as ratios against the torch import. Goals: `attention` alone at most 2x (issue 2); the
first five exercises at most 6x (issue 3); the whole curriculum is reported with and without the
capstone (`--quick`) (issue 4), within 4x with it (issue 48); each exercise of the second track (`--track modern`)
alone at most 2x (issue 50), `tiny_gpt` with its capstone and without (`--quick`). Rows whose tests are not
installed yet are skipped; `--only-modern` times only the torch import, `attention` and the second track's rows.

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
MODERN = ("rope", "kv_cache", "grouped_query_attention", "flash_attention", "sliding_window", "tiny_gpt")
# (label, exercises, extra arguments, goal as a multiple of the torch import, or None to report only)
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "OMP_NUM_THREADS": "1"}
ROWS: list[tuple[str, tuple[str, ...], tuple[str, ...], float | None]] = [
    ("grader check attention", ("attention",), (), 2.0),
    ("grader check <first five exercises>", FIRST_FIVE, (), 6.0),
    ("grader check <all nine> --quick", ALL, ("--quick",), None),
    ("grader check <all nine>", ALL, (), 4.0),
    *((f"grader check {name}", (name,), (), 2.0) for name in MODERN),
    ("grader check tiny_gpt --quick", ("tiny_gpt",), ("--quick",), 2.0),
]


def wall(command: list[str]) -> float | None:
    """The command's wall time; None, with its exit code and last line of stderr printed, when it failed."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        print(f"FAILED (exit {done.returncode}): {' '.join(command[2:])}: {last}", file=sys.stderr, flush=True)
        return None
    return time.perf_counter() - started


def installed(exercises: tuple[str, ...]) -> bool:
    return all((ROOT / "tests" / "public" / f"test_{name}.py").is_file() for name in exercises)


def main(rounds: int, device: str = "auto", only_modern: bool = False) -> None:
    commands = {"python -c 'import torch'": ([sys.executable, "-c", "import torch"], None)}
    for label, exercises, extra, goal in ROWS:
        if installed(exercises) and (not only_modern or exercises[0] in MODERN or exercises == ("attention",)):
            command = [sys.executable, "-m", "grader", "check", *exercises, *extra, "--submission", "solutions",
                       "--device", device]
            commands[label] = (command, goal)
    for command, _ in commands.values():
        wall(command)  # warm the file cache
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(rounds):
        for label, (command, _) in commands.items():
            if (seconds := wall(command)) is not None:
                times[label].append(seconds)
    baseline = statistics.median(times["python -c 'import torch'"])
    for label, (_, goal) in commands.items():
        if not times[label]:
            print(f"{label:42s} failed in every run")
            continue
        median = statistics.median(times[label])
        ratio = "" if label.startswith("python") else f"  ratio {median / baseline:5.2f}x"
        goal_text = "" if goal is None else f" (goal: at most {goal:g}x)"
        runs = f"{len(times[label])} runs" + ("" if len(times[label]) == rounds else f" ({rounds} tried)")
        print(f"{label:42s} median {median:6.2f} s over {runs}{ratio}{goal_text}")


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
    parser.add_argument("--only-modern", action="store_true",
                        help="time only the torch import, attention and the second track's exercises")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="graded with --device (the capstone rows train on it too)")
    parser.add_argument("--capstone-seeds", type=int, default=3, help="task seeds 0..N-1 for the capstone rows")
    parser.add_argument("--capstone-variant", action="append", default=[], metavar="FILE",
                        help="also time this transformer.py (repeatable)")
    arguments = parser.parse_args()
    if not arguments.capstone_only:
        main(arguments.rounds, arguments.device, arguments.only_modern)
    capstone_times(range(arguments.capstone_seeds), arguments.capstone_variant, arguments.device)
