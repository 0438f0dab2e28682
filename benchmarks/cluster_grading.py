"""Wall time of `grader batch --cluster` on a LocalCluster against a local `grader batch`, on the same class.

One class (built by batch_grading's `build_class`: correct, half-finished, stub, one-mistake and broken
submissions, some zipped) is graded three times in one run, each into a fresh --out and timed as a
subprocess, as a user would run it: `grader batch --jobs 2`, then `--cluster local:1` and `--cluster local:2`
(a Dask LocalCluster of one, then two, single-thread worker processes on this machine, each keeping one warm
slot). There is no untimed warm-up: each run pays its own start-up (its slots importing torch and collecting
the suites; for a cluster, the scheduler and workers starting), as every real batch does.

All three must write the same grades.csv (every row and column: ids, statuses, sandbox tiers, scores, totals,
diagnosed mistakes); the script exits 1 if they do not. It prints each run's wall time, submissions per
minute, and how long after its start the first report landed (its start-up plus one submission), then:

- scaling efficiency: throughput(local:2) / (2 x throughput(local:1)), 1.0 being perfect;
- the cluster's overhead per submission against a local slot: (wall(local:2) - wall(--jobs 2)) / submissions,
  also as a percentage of the local batch's time per submission (goal: within 10%);
- the single-slot workers needed to grade a cohort of 10,000 in 15 minutes:
  ceil(10000 x seconds per submission per slot / (900 s x efficiency)), the seconds per submission per slot
  being local:1's wall time over the class (start-up included: a small class overstates it a little).

`--json PATH` writes the same figures (docs/benchmarks.md, docs/cluster.md#how-many-workers).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.batch_grading import ENV, MIX, build_class  # noqa: E402 - after the kit's folder is on the path

COHORT = 10_000  # submissions in the projection
DEADLINE_S = 15 * 60  # to grade them in
OVERHEAD_GOAL_PERCENT = 10.0
RUNS = (("grader batch --jobs 2", ("--jobs", "2")),
        ("grader batch --cluster local:1", ("--cluster", "local:1")),
        ("grader batch --cluster local:2", ("--cluster", "local:2")))


@dataclass(frozen=True)
class Timed:
    """One timed batch: what ran and how long it took."""

    run: str
    wall_s: float
    per_minute: float
    first_report_s: float  # after the start: the run's start-up plus its first submission


def batch(folder: Path, out: Path, options: tuple[str, ...], log: Path) -> tuple[float, float]:
    """Wall seconds of one `grader batch` subprocess, and how long after its start the first report landed (its
    start-up, plus one submission); SystemExit (with its log's tail) if it did not exit 0."""
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *options]
    started, clock = time.perf_counter(), time.time()
    with log.open("w") as output:
        code = subprocess.run(command, cwd=ROOT, env=ENV, stdout=output, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise SystemExit(f"{' '.join(command[2:])} exited {code}:\n{tail}")
    first = min(path.stat().st_mtime for path in out.glob("*.json") if path.name != "summary.json") - clock
    return wall, first


def rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open(newline="", encoding="utf-8") as file:
        return {row["id"]: row for row in csv.DictReader(file)}


def differences(reference: dict[str, dict[str, str]], other: dict[str, dict[str, str]]) -> list[str]:
    """Each id whose row differs, with the columns that do (reference → other)."""
    found = []
    for submission in sorted(set(reference) | set(other)):
        mine, theirs = reference.get(submission), other.get(submission)
        if mine is None or theirs is None:
            found.append(f"{submission}: {'missing' if theirs is None else 'extra'}")
        elif mine != theirs:
            columns = [f"{k} {mine.get(k)!r} → {theirs.get(k)!r}" for k in mine if mine.get(k) != theirs.get(k)]
            found.append(f"{submission}: {'; '.join(columns)}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.2,
                        help="fraction of batch_grading's 100 submissions (default 0.2: 20 submissions)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as temporary:
        work = Path(temporary)
        kinds = build_class(work / "class", args.scale)
        count = len(kinds)
        mix = ", ".join(f"{sum(k == kind for k in kinds.values())} {kind}" for kind, _ in MIX)
        print(f"{count} submissions: {mix}; {os.cpu_count()} cores; each run pays its own start-up (no warm-up run)")
        print(f"  {'run':<32} {'wall':>10} {'per minute':>12} {'1st report':>10}")
        timed, graded = [], []
        for number, (name, options) in enumerate(RUNS):
            wall, first = batch(work / "class", work / f"out-{number}", options, work / f"run-{number}.log")
            timed.append(Timed(name, round(wall, 2), round(count / wall * 60, 2), round(first, 2)))
            graded.append(rows(work / f"out-{number}"))
            print(f"  {name:<32} {wall:8.1f} s {count / wall * 60:8.1f}/min {first:8.1f} s", flush=True)
        differ = {t.run: found for t, other in zip(timed[1:], graded[1:], strict=True)
                  if (found := differences(graded[0], other))}

    local, one, two = (t.wall_s for t in timed)
    efficiency = one / (2 * two)  # throughput(local:2) / (2 x throughput(local:1)), as wall times
    overhead = (two - local) / count
    overhead_percent = 100 * (two - local) / local  # of the local batch's time per submission
    per_slot = one / count
    workers = math.ceil(COHORT * per_slot / (DEADLINE_S * efficiency))
    print(f"scaling efficiency, local:1 → local:2:   {efficiency:6.2f} (1.00 is perfect)")
    print(f"cluster overhead per submission:        {overhead:+6.2f} s = {overhead_percent:+.1f}% of a local slot's "
          f"{local / count:.2f} s (goal: within {OVERHEAD_GOAL_PERCENT:g}%: "
          f"{'met' if overhead_percent <= OVERHEAD_GOAL_PERCENT else 'NOT met'})")
    print(f"seconds per submission per slot:        {per_slot:6.2f} s (local:1, start-up included)")
    print(f"workers for {COHORT:,} in {DEADLINE_S // 60} minutes:        {workers:6d} single-slot workers "
          f"(ceil({COHORT} x {per_slot:.2f} / ({DEADLINE_S} x {efficiency:.2f})))")
    if differ:
        for run, found in differ.items():
            print(f"grades.csv of {run} differs from {timed[0].run}'s in {len(found)} rows:")
            for line in found:
                print(f"  {line}")
    else:
        print(f"grades.csv: the same {count} rows in all three runs")
    if args.json is not None:
        figures = {
            "submissions": count, "mix": {kind: sum(k == kind for k in kinds.values()) for kind, _ in MIX},
            "cores": os.cpu_count(), "runs": [asdict(t) for t in timed],
            "scaling_efficiency": round(efficiency, 4),
            "overhead_s_per_submission": round(overhead, 3), "overhead_percent": round(overhead_percent, 2),
            "overhead_goal_percent": OVERHEAD_GOAL_PERCENT, "seconds_per_submission_per_slot": round(per_slot, 3),
            "projection": {"submissions": COHORT, "deadline_s": DEADLINE_S, "workers": workers},
            "same_grades": not differ, "differences": differ,
        }
        args.json.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
