"""Parallel efficiency of `grader batch` over a class of 100 submissions.

The class mixes what an instructor receives: reference-correct submissions (the reference and
the catalogue's correct variants), half-finished ones (the first k exercises done, stubs after),
untouched stubs, submissions with one known mistake (solutions/mistakes/) and broken
ones (a syntax error, a crash at import, a segfault, a zip). The class is graded twice in one session:
by `grader batch --jobs 1`, whose reports' durations are each submission's grading work with nothing
beside it, and by `grader batch --jobs N`. The parallel efficiency is that summed work divided by N,
over the second batch's wall time: the share of the cores' time the batch spends grading (goal, issue 48:
at least 0.9 on 2 cores). Both must give the same scores. (The speed-up over a loop of `grader check`
processes, the goal before, measured the start-up a batch saves, not grading.)

No scheduler reaches 1 where the cores slow each other down: on a virtual machine two single-threaded processes
often share a physical core's caches, memory bandwidth or power budget. So the same run also grades every fifth
submission with `grader batch --jobs 1`, alone and then as N such batches side by side: the alone time over the
side-by-side time is the most any batch can get of the cores here (its ceiling: N independent slots, nothing
scheduled), and the efficiency over that ceiling is what is left to the batch's own scheduling.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.judge import variants  # noqa: E402 - after the kit's folder is on the path

CATALOGUE = ROOT / "tests" / "kit" / "submissions"
ORDER = ("attention", "masking", "head_attention", "multi_head_attention", "positional_encoding", "sublayers",
         "encoder", "decoder", "transformer")
# (kind, how many of 100)
MIX = (("correct", 25), ("partial", 25), ("stub", 10), ("one mistake", 30), ("broken", 10))
# with the bytecode cache on, as a user's Python has it (see grading_time.py)
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "OMP_NUM_THREADS": "1",
       "NO_COLOR": "1"}


def solutions_with(folder: Path, swaps: dict[str, Path | str]) -> None:
    folder.mkdir(parents=True)
    for name in ORDER:
        shutil.copyfile(ROOT / "solutions" / f"{name}.py", folder / f"{name}.py")
    for name, source in swaps.items():
        if isinstance(source, Path):
            shutil.copyfile(source, folder / f"{name}.py")
        else:
            (folder / f"{name}.py").write_text(source)


def spread(items: list, count: int) -> list:
    """`count` items taken evenly across `items`."""
    return [items[i * len(items) // count] for i in range(count)]


def build_class(folder: Path, scale: float) -> dict[str, str]:
    """Write the submissions into `folder`; returns id -> kind."""
    kinds: dict[str, str] = {}
    counts = {kind: max(1, round(n * scale)) for kind, n in MIX}
    correct = sorted(CATALOGUE.glob("*/correct/*.py"))
    for i, variant in enumerate([None, *spread(correct, counts["correct"] - 1)]):
        name = f"correct-{i:02d}"
        solutions_with(folder / name, {} if variant is None else {variant.parent.parent.name: variant})
        kinds[name] = "correct"
    for i in range(counts["partial"]):
        done = 1 + i % (len(ORDER) - 1)
        name = f"partial-{i:02d}"
        solutions_with(folder / name, {x: ROOT / "exercises" / f"{x}.py" for x in ORDER[done:]})
        kinds[name] = "partial"
    for i in range(counts["stub"]):
        name = f"stub-{i:02d}"
        shutil.copytree(ROOT / "exercises", folder / name)
        kinds[name] = "stub"
    wrong = [variant for exercise in ORDER for variant in variants.mistakes(exercise)]
    for i, variant in enumerate(spread(wrong, counts["one mistake"])):
        name = f"mistake-{i:02d}"
        solutions_with(folder / name, {variant.exercise: variant.source})
        kinds[name] = "one mistake"
    broken = [
        {"masking": "def causal_average(x):\n    return x[:, :t+1\n"},
        {"attention": CATALOGUE / "hostile" / "exit_at_import" / "attention.py"},
        {"attention": CATALOGUE / "hostile" / "segfault" / "attention.py"},
        {"multi_head_attention": "import nonexistent_module\n"},
        {"attention": "raise RuntimeError('broken at import')\n"},
    ]
    for i in range(counts["broken"]):
        name = f"broken-{i:02d}"
        solutions_with(folder / name, broken[i % len(broken)])
        if i % 2:  # half of them arrive zipped, as an LMS export would
            with zipfile.ZipFile(folder / f"{name}.zip", "w") as archive:
                for path in sorted((folder / name).iterdir()):
                    archive.write(path, f"{name}/exercises/{path.name}")
            shutil.rmtree(folder / name)
        kinds[name] = "broken"
    return kinds


def batch(folder: Path, out: Path, jobs: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--jobs", str(jobs)],
                   cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def scores(out: Path) -> dict[str, dict[str, float]]:
    found = {}
    for path in out.glob("*.json"):
        if path.name != "summary.json":
            report = json.loads(path.read_text())
            found[path.stem] = {e["id"]: e["score"] for e in report["exercises"]}
    return found


def work(out: Path) -> float:
    """The summed grading time of the reports in `out` (`duration_s`: from the submission's session opening to its
    report, in its slot)."""
    return sum(json.loads(path.read_text()).get("duration_s") or 0.0 for path in out.glob("*.json")
               if path.name != "summary.json")


def ceiling(folder: Path, kinds: dict[str, str], jobs: int) -> tuple[float, float]:
    """The wall time of `grader batch --jobs 1` over a sample of the class alone, and of `jobs` such batches started
    together, on copies: what the cores give to several slots at once, whatever schedules them."""
    sample = folder / "sample"
    for name in list(kinds)[::5]:
        source = folder / "class" / name
        if source.is_dir():
            shutil.copytree(source, sample / name)
        else:
            sample.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.with_suffix(".zip"), (sample / name).with_suffix(".zip"))

    def together(count: int, round_: int) -> float:
        started = time.perf_counter()
        running = [subprocess.Popen([sys.executable, "-m", "grader", "batch", str(sample), "--out",
                                     str(folder / f"sample-{count}-{round_}-{i}"), "--jobs", "1"],
                                    cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for i in range(count)]
        for process in running:
            process.wait()
        return time.perf_counter() - started

    together(1, 0)  # warm: the catalogue's observed facets kept on disk, the file cache
    return together(1, 1), together(jobs, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 100 submissions (default 1)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as temporary:
        folder = Path(temporary)
        kinds = build_class(folder / "class", args.scale)
        mix = ", ".join(f"{sum(k == kind for k in kinds.values())} {kind}" for kind, _ in MIX)
        print(f"{len(kinds)} submissions: {mix}; {os.cpu_count()} cores", flush=True)
        alone_sample, together_sample = ceiling(folder, kinds, args.jobs)
        most = alone_sample / together_sample
        print(f"grader batch --jobs 1 of every fifth submission: {alone_sample:.1f} s alone, {together_sample:.1f} s "
              f"for {args.jobs} side by side: this machine's ceiling is {most:.2f}", flush=True)
        alone_s = batch(folder / "class", folder / "alone", 1)
        graded = work(folder / "alone")
        print(f"grader batch --jobs 1: {alone_s:7.1f} s, of which grading {graded:7.1f} s", flush=True)
        batch_s = batch(folder / "class", folder / "batch", args.jobs)
        print(f"grader batch --jobs {args.jobs}: {batch_s:7.1f} s", flush=True)
        alone, batched = scores(folder / "alone"), scores(folder / "batch")
        differ = sorted(name for name in kinds if alone.get(name) != batched.get(name))
        efficiency = graded / (args.jobs * batch_s)
        print(f"parallel efficiency: {efficiency:.2f} (goal: at least 0.9), {efficiency / most:.2f} of the machine's "
              f"ceiling; speed-up over --jobs "
              f"1: {alone_s / batch_s:.2f}x; same scores for {len(kinds) - len(differ)} of {len(kinds)} submissions"
              + (f"; differ: {', '.join(differ)}" if differ else ""))


if __name__ == "__main__":
    main()
