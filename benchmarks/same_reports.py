"""Whether two revisions of the kit write the same report for every submission the kit knows (issue 49, item 8).

A refactor must not change a grade, a message or a diagnosis. This script grades one set of submissions at two git
revisions and compares the per-submission JSON reports field by field. The set, built once from the newer revision's
files so that both sides grade byte-identical folders:

- the reference (`solutions/`) and the untouched stubs (`exercises/`);
- every correct variant, every catalogued mistake and every held-out mistake, each as the reference with that one
  exercise file swapped in (`grader.judge.variants`, as tests/kit/test_catalogue_grading.py builds them);
- every submission folder under `tests/kit/submissions/` that is not an exercise's catalogue (hostile, forgery,
  isolation, scratch, stalling), copied as it is.

Each revision is checked out in a `git worktree` of its own under a temporary folder (the checkout you run this from
is never touched) and grades the whole set with one `grader batch --suite all --jobs N`, run as `python -m grader`
from inside the worktree with PYTHONPATH pointing at it, GRADER_SALT fixed so that both sides draw alike, in English,
one batch at a time, OMP_NUM_THREADS=1.

The "before" worktree gets the tests/ half of each commit named by --patch-before (default a6bdc36, which made three
Transformer tests independent of the random draw: a deliberate change of those tests' reports, not a refactor's), so
that the comparison is of the grader's code, not of those tests.

Fields that legitimately vary are left out, each for a reason printed with the results: `duration_s` (wall time) and
`key` (a batch's rerun key: a digest of the grader's own source, which a refactor changes by design); the worktrees'
and out folders' paths are written as <kit> and <out> before comparing. Every other difference is printed,
one line per submission, with the commit that explains it where one is known (KNOWN below), and the total. Exit 1 if
any difference is not explained (with --strict: if any differs at all).

    python benchmarks/same_reports.py                       # bfc8d80^ against HEAD: about 40 min on 2 cores
    python benchmarks/same_reports.py --keep                # keep the worktrees and out folders
    python benchmarks/same_reports.py --compare OUT_BEFORE OUT_AFTER   # compare two batches' out folders only
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SALT = "issue-49-same-reports"
# Left out of the comparison, each for its reason (printed with the results).
IGNORED = {
    "duration_s": "wall time of the grading",
    "key": "a batch's rerun key, a digest of the grader's own source files: a refactor changes it by design",
}


@dataclass(frozen=True)
class Known:
    """A deliberate change of behaviour between the revisions, and the differences it explains."""

    commit: str
    why: str
    matches: Callable[[str, str, object, object], bool]  # (submission id, field, before, after)


# Attacks whose feedback depends on timing, not on the grader's code: what a flooding, hoarding or file-creating
# submission printed before it was cut off, and whether the kernel kills it while importing or while called. In the
# first run (bfc8d80^ against d2b3d94), fake_reports, memory_blowup and many_files regraded at d2b3d94 alone
# differed from their own first grading in the same fields, and stdout_flood's two differing messages cut the same
# 104,725,028 bytes in total, split differently between two consecutive tests.
RUN_TO_RUN = frozenset({"hostile-fake_reports", "hostile-memory_blowup", "hostile-stdout_flood",
                        "isolation-many_files"})


def _run_to_run(submission: str, field: str, _old: object, _new: object) -> bool:
    return submission in RUN_TO_RUN and field.rsplit(".", 1)[-1] in ("message", "outcome", "causes")


# What can explain a difference: a deliberate change between the revisions, or feedback that varies between two
# gradings at one revision. Only messages, outcomes and causes of those few attacks, never a score.
KNOWN: tuple[Known, ...] = (
    Known("no commit", "varies run to run at one revision: the printed output of an attack cut off, or where the "
          "kernel killed it; messages, outcomes and causes only, never points", _run_to_run),
)


def run(command: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, check=True, text=True, capture_output=True, **kwargs)


def revision(name: str) -> str:
    return run(["git", "rev-parse", "--verify", f"{name}^{{commit}}"], ROOT).stdout.strip()


def worktree(rev: str, folder: Path, patches: list[str]) -> list[str]:
    """Check `rev` out into `folder` as a detached worktree; apply the tests/ half of each patch commit it lacks.
    Returns what was applied."""
    run(["git", "worktree", "add", "--detach", str(folder), rev], ROOT)
    applied = []
    for commit in patches:
        if subprocess.run(["git", "merge-base", "--is-ancestor", commit, rev], cwd=ROOT).returncode == 0:
            continue  # already in it
        diff = run(["git", "show", "--format=", commit, "--", "tests"], ROOT).stdout
        run(["git", "apply"], folder, input=diff)
        applied.append(commit)
    return applied


def environment(kit: Path) -> dict[str, str]:
    """What `kit`'s grader runs with: its own code first on the path, the same salt and language on both sides."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GRADER_") and k != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPATH": str(kit), "OMP_NUM_THREADS": "1", "GRADER_SALT": SALT, "GRADER_LANG": "en", "NO_COLOR": "1"}


def course(kit: Path) -> list[str]:
    """The exercises `kit`'s grader grades when no track is named (the course), in order."""
    code = ("from grader import curriculum as c\n"
            "print(' '.join(c.FIRST.ids if hasattr(c, 'FIRST') else (e.id for e in c.EXERCISES)))")
    return run([sys.executable, "-c", code], kit, env=environment(kit)).stdout.split()


def materialise(kit: Path, out: Path, order: list[str]) -> dict[str, str]:
    """Write every submission into `out`, one folder each, from `kit`'s files and variants, with the exercises of
    `order`; returns id -> kind."""
    sys.path.insert(0, str(kit))
    from grader.judge import variants  # the kit's own, from `kit`

    assert Path(variants.__file__).resolve().is_relative_to(kit.resolve()), variants.__file__
    assert variants.solutions_folder() == kit / "solutions", variants.solutions_folder()
    kinds: dict[str, str] = {}

    def reference_with(name: str, kind: str, variant=None) -> None:
        folder = out / name
        folder.mkdir(parents=True)
        for exercise in order:
            shutil.copyfile(kit / "solutions" / f"{exercise}.py", folder / f"{exercise}.py")
        if variant is not None:
            variants.write(variant, folder)
        kinds[name] = kind

    reference_with("reference", "reference")
    (out / "stubs").mkdir()
    for exercise in order:
        shutil.copyfile(kit / "exercises" / f"{exercise}.py", out / "stubs" / f"{exercise}.py")
    kinds["stubs"] = "stubs"
    for kind, found in (("correct", variants.correct_variants), ("mistake", variants.mistakes),
                        ("held-out", variants.held_out_mistakes)):
        for exercise in order:
            for variant in found(exercise):
                reference_with(f"{kind}-{exercise}-{variant.name}", kind, variant)
    catalogue = kit / "tests" / "kit" / "submissions"
    catalogued = ("correct", "correct.py", "held_out.py")  # an exercise's catalogue, built above as variants
    for group in sorted(p for p in catalogue.iterdir() if p.is_dir() and not any((p / n).exists() for n in catalogued)):
        own = [p for p in group.iterdir() if p.suffix == ".py"]
        for folder in [group] if own else sorted(p for p in group.iterdir() if p.is_dir()):
            name = group.name if own else f"{group.name}-{folder.name}"
            shutil.copytree(folder, out / name, ignore=shutil.ignore_patterns("__pycache__"))
            kinds[name] = group.name
    return kinds


def batch(kit: Path, submissions: Path, out: Path, jobs: int, log: Path) -> tuple[int, float]:
    """Grade `submissions` with `kit`'s grader, run from inside it; returns the exit code and the wall time."""
    env = environment(kit)
    check = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"], cwd=kit, env=env,
                           check=True, text=True, capture_output=True).stdout.strip()
    assert Path(check).resolve().is_relative_to(kit.resolve()), f"{kit} would grade with {check}"
    started = time.perf_counter()
    with log.open("w") as written:
        code = subprocess.run([sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out),
                               "--jobs", str(jobs), "--suite", "all"], cwd=kit, env=env, stdout=written,
                              stderr=subprocess.STDOUT).returncode
    return code, time.perf_counter() - started


def paths(work: Path) -> dict[str, str]:
    """What each side's own folders are written as, longest first: the same text on both sides."""
    return {str(work / "out-before"): "<out>", str(work / "out-after"): "<out>", str(work / "before"): "<kit>",
            str(work / "after"): "<kit>", str(work): "<work>"}


def reports(out: Path, replace: dict[str, str]) -> dict[str, object]:
    """The batch's per-submission reports, by id, their ignored fields left out and their paths replaced."""
    found = {}
    for path in sorted(out.glob("*.json")):
        if path.name != "summary.json":
            text = path.read_text(encoding="utf-8")
            for old, new in replace.items():
                text = text.replace(json.dumps(old)[1:-1], new)
            found[path.stem] = strip(json.loads(text))
    return found


def strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in IGNORED}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def differences(before: object, after: object, where: str = "") -> list[tuple[str, object, object]]:
    """(field, before, after) for every leaf that differs; a test or an exercise is named by its name or id."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for k in [*before, *(k for k in after if k not in before)]:
            found += differences(before.get(k, "<absent>"), after.get(k, "<absent>"), f"{where}.{k}" if where else k)
        return found
    if isinstance(before, list) and isinstance(after, list) and all(isinstance(v, dict) for v in before + after):
        named = [{(v.get("name") or v.get("id") or str(i)): v for i, v in enumerate(side)} for side in (before, after)]
        if all(len(n) == len(side) for n, side in zip(named, (before, after), strict=True)):
            return differences(*named, where)
    return [] if before == after else [(where, before, after)]


def short(value: object, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def explain(submission: str, found: list[tuple[str, object, object]]) -> str | None:
    """The commit that explains every one of `found`'s differences, or None."""
    for known in KNOWN:
        if all(known.matches(submission, field, old, new) for field, old, new in found):
            return f"{known.commit}: {known.why}"
    return None


def compare(before_out: Path, after_out: Path, replace: dict[str, str], kinds: dict[str, str] | None,
            strict: bool) -> int:
    for field, why in IGNORED.items():
        print(f"ignored: {field}: {why}")
    for old, new in replace.items():
        print(f"paths: {old} written as {new}")
    before, after = reports(before_out, replace), reports(after_out, replace)
    ids = sorted(set(before) | set(after) | set(kinds or ()))
    differ = unexplained = 0
    for submission in ids:
        if submission not in before or submission not in after:
            side = "before" if submission not in before else "after"
            print(f"DIFFERS {submission}: no report {side}, NOT EXPLAINED")
            differ, unexplained = differ + 1, unexplained + 1
            continue
        found = differences(before[submission], after[submission])
        if not found:
            continue
        differ += 1
        why = explain(submission, found)
        unexplained += why is None
        fields = "; ".join(f"{field}: {short(old)} -> {short(new)}" for field, old, new in found[:3])
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        print(f"DIFFERS {submission}: {len(found)} fields: {fields}{more}; "
              + (f"explained by {why}" if why else "NOT EXPLAINED"))
    print(f"{len(ids)} submissions, {differ} differ ({differ - unexplained} explained, {unexplained} not)")
    return 1 if unexplained or (strict and differ) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="bfc8d80^", help="the older revision (default bfc8d80^)")
    parser.add_argument("--after", default="HEAD", help="the newer revision (default HEAD)")
    parser.add_argument("--patch-before", action="append", metavar="COMMIT",
                        help="a commit whose tests/ changes the before worktree gets (default a6bdc36; repeatable)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the worktrees and out folders (their path printed)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on any difference, explained or not")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OUT_BEFORE", "OUT_AFTER"),
                        help="only compare two batches' out folders written by an earlier --keep run")
    args = parser.parse_args()
    if args.compare:
        work = args.compare[0].resolve().parent
        return compare(*args.compare, paths(work), None, args.strict)
    patches = args.patch_before or ["a6bdc36"]
    before, after = revision(args.before), revision(args.after)
    work = Path(tempfile.mkdtemp(prefix="same-reports-"))
    trees = {"before": work / "before", "after": work / "after"}
    try:
        applied = worktree(before, trees["before"], patches)
        worktree(after, trees["after"], [])
        patched = (f", with the tests/ changes of {', '.join(applied)} (deliberate changes of those tests' reports)"
                   if applied else "")
        print(f"before: {args.before} = {before[:10]}{patched}")
        print(f"after: {args.after} = {after[:10]}")
        known = course(trees["before"])
        order = [exercise for exercise in course(trees["after"]) if exercise in known]
        print(f"the course's exercises both revisions grade: {', '.join(order)}")
        kinds = materialise(trees["after"], work / "submissions", order)
        counts = {kind: sum(k == kind for k in kinds.values()) for kind in dict.fromkeys(kinds.values())}
        print(f"{len(kinds)} submissions, built from {after[:10]}: "
              + ", ".join(f"{n} {kind}" for kind, n in counts.items()), flush=True)
        for side, tree in trees.items():
            code, seconds = batch(tree, work / "submissions", work / f"out-{side}", args.jobs, work / f"{side}.log")
            print(f"{side}: grader batch --jobs {args.jobs} --suite all: exit {code}, {seconds:.0f} s", flush=True)
        return compare(work / "out-before", work / "out-after", paths(work), kinds, args.strict)
    finally:
        if args.keep:
            print(f"kept: {work} (git worktree remove --force each of {work}/before and {work}/after when done)")
        else:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
