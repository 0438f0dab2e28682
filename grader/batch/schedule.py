"""`schedule` grades a folder of submissions in parallel and resumably; `summary` then sums up the class.

Each job is a `slot` process that imported torch and pytest once and keeps one sandbox warm; each
submission is graded in a fresh process forked from its slot, with workers forked in its sandbox,
under a whole-submission time budget. Its report is written atomically to DIR/<id>.json as soon as it is
done, keyed by a hash of the submission's exercise files, the suite and the kit; a rerun skips what
is done, so a batch killed halfway finishes the rest and ends as an uninterrupted run would.
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grader import lang, sources
from grader.batch import class_report, records
from grader.batch.jobs import RESERVED_IDS, Entry, Job, Result, Status
from grader.batch.plan import GradeAll, Plan
from grader.batch.slot_process import Slot
from grader.batch.summary import summarise, write_grades_csv
from grader.grade.selection import Selection
from grader.host.scratch import remove_stale_stages
from grader.intake.submission import SubmissionInputError, load
from grader.kit import VERSION
from grader.lang import N_, plural
from grader.text import id_of, skeleton


def discover(folder: Path) -> list[Entry]:
    """Every sub-folder, .zip and notebook (.ipynb) in `folder`, with its id: its file name (a file's without its
    suffix) where that is safe.

    A name that is not safe as a file name or a spreadsheet cell (see `text.id_of`), or is taken (by an
    earlier submission in name order, or by grades.csv and summary.json), gets a suffix from a hash of
    the file name: ids are unique, and the same on every run, so a rerun finds the reports it wrote.
    Taken means alike in case (one file on some disks) or in looks (`text.skeleton`: `bob`, `bοb` with a
    Greek omicron, `bоb` with a Cyrillic o), so that no two rows of grades.csv read as one student.
    """
    candidates = sorted(p for p in folder.iterdir() if not p.name.startswith(".")
                        and (p.is_dir() or p.suffix.lower() in (".zip", ".ipynb")))
    taken: set[tuple[str, str]] = set().union(*map(_alike, RESERVED_IDS))
    entries = []
    for path in candidates:
        name = path.name if path.is_dir() else path.stem
        usable = [n for n in (name, path.name) if id_of(n) == n and not _alike(n) & taken]
        chosen = usable[0] if usable else f"{id_of(name)}-{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:8]}"
        base, extra = chosen, 1
        while _alike(chosen) & taken:  # a classmate named their folder after this one's hash
            extra += 1
            chosen = f"{base}-{extra}"
        taken |= _alike(chosen)
        entries.append(Entry(chosen, path))
    return entries


def _alike(submission_id: str) -> set[tuple[str, str]]:
    """What no two ids of a batch may share: their case-folded form and their skeleton (what they look like)."""
    return {("case", submission_id.casefold()), ("looks", skeleton(submission_id))}


def key(entry: Entry, selection: Selection, salt: str = "") -> str:
    """What a report depends on: the exercise files read, the suite and exercises, the kit, the course's salt (its
    draws) and the language its feedback is written in (English and no salt add nothing, as before either)."""
    digest = hashlib.sha256(f"{VERSION}|{selection.suite}|{','.join(selection.exercises)}".encode())
    if salt:
        digest.update(b"|salt=" + hashlib.sha256(salt.encode()).digest())
    if lang.current() != "en":  # a rerun with another --lang writes every report again, in that language
        digest.update(f"|lang={lang.current()}".encode())
    try:
        for name, data in sorted(load(entry.path).files.items()):
            digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    except (SubmissionInputError, OSError):  # refused when graded; its key changes when its bytes do
        try:
            digest.update(entry.path.read_bytes() if entry.path.is_file() else b"unreadable")
        except OSError:
            digest.update(b"unreadable")
    # The suites run, and the kit's code, catalogs and staged files (`sources`): a change to any of them regrades.
    for path in sorted(selection.files):
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(sources.digest().encode())
    return digest.hexdigest()


def run(entries: list[Entry], plan: Plan, *, on_result: Callable[[Result], None] | None = None,
        say: Callable[[str], None] = print) -> list[Result]:
    """Grade every entry not already done, as `plan` says; returns one Result per entry, in entry order.

    With `plan.cluster` (a Dask scheduler's address, or local:N), the slots are the cluster's (`grader.batch.cluster`)
    and `say` tells of each worker it refuses.
    """
    out, selection = plan.out, plan.selection
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".partial-*"):  # left by a batch that was killed: its reports never landed
        shutil.rmtree(stale, ignore_errors=True)
    if gone := records.move_aside(out, {entry.id for entry in entries}):
        say(plural(len(gone), N_("grader: the report of {ids}, no longer among the submissions, was moved to {aside}"),
                   N_("grader: the reports of {count} submissions no longer among them were moved to {aside}: {ids}"),
                   ids=", ".join(gone), aside=str(out / records.REMOVED_FOLDER)))
    keys = {entry.id: key(entry, selection, plan.salt) for entry in entries}
    results: dict[str, Result] = {}
    todo = []
    for entry in entries:
        done = records.read(out / f"{entry.id}.json")
        # "failed" means the grader broke, not the submission: try those again.
        if not plan.force and done and done.get("key") == keys[entry.id] and done.get("status") != "failed":
            results[entry.id] = Result(entry.id, Status.SKIPPED, done)
        else:
            todo.append(entry)
    def record(result: Result) -> None:
        results[result.id] = result
        if on_result:
            on_result(result)

    for result in list(results.values()):
        record(result)
    grade_all: GradeAll = _on_slots
    if plan.cluster is not None:
        from grader.batch import cluster as dask_cluster

        grade_all = dask_cluster.run
    grade_all(plan, todo, keys, record, say)
    return _finish(entries, results, out, selection)


def _on_slots(plan: Plan, todo: list[Entry], keys: dict[str, str], record: Callable[[Result], None],
              say: Callable[[str], None]) -> None:
    """Grade `todo` on `plan.jobs` local slots (the `GradeAll` of a batch without --cluster)."""
    # Every slot stages its submissions under one folder of this batch's, removed when the batch ends
    # however it ends, so that no student's files stay on disk after it.
    remove_stale_stages()
    stage_dir = Path(tempfile.mkdtemp(prefix=f"grader-batch-{os.getpid()}-"))
    stage_dir.chmod(0o711)  # crossed, never listed, by bubblewrap running as uid 65534
    try:
        _run_slots(plan, todo, keys, record, stage_dir)
    finally:
        shutil.rmtree(stage_dir, ignore_errors=True)


def _run_slots(plan: Plan, todo: list[Entry], keys: dict[str, str], record: Callable[[Result], None],
               stage_dir: Path) -> None:
    started = [Slot(plan.device, stage_dir) for _ in range(min(max(1, plan.jobs), max(1, len(todo))))]
    slots: queue.Queue[Slot] = queue.Queue()
    for slot in started:
        slots.put(slot)

    def grade(entry: Entry) -> Result:
        slot = slots.get()
        try:
            return _grade(slot, entry, plan, keys[entry.id])
        finally:
            slots.put(slot)

    pool = ThreadPoolExecutor(max_workers=max(1, plan.jobs))
    try:
        for future in as_completed([pool.submit(grade, entry) for entry in todo]):
            record(future.result())
    finally:
        # On Ctrl-C, what has not started never starts; what is running dies with its slot.
        pool.shutdown(wait=False, cancel_futures=True)
        for slot in started:
            slot.close()


def _finish(entries: list[Entry], results: dict[str, Result], out: Path, selection: Selection) -> list[Result]:
    """The class's files, once every entry has its result: grades.csv, summary.json and the class report."""
    ordered = [results[entry.id] for entry in entries]
    write_grades_csv(ordered, selection, out / "grades.csv")
    summary = summarise(ordered, selection)
    summary.write(out / "summary.json")
    class_report.write(ordered, selection, summary, out)
    return ordered


def _grade(slot: Slot, entry: Entry, plan: Plan, report_key: str) -> Result:
    selection = plan.selection
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=plan.out.resolve())) / "report.json"
    job = Job(str(entry.path.resolve()), str(partial), list(selection.exercises), selection.suite, plan.timeout_s,
              plan.isolation, salt=plan.salt, language=plan.language, limits=plan.limits.to_json())
    try:
        outcome = slot.grade(job, timeout_s=plan.timeout_s + 60)
        report = records.read(partial) if outcome.status == Status.GRADED else None
    finally:
        shutil.rmtree(partial.parent, ignore_errors=True)
    return records.recorded(entry, selection, report_key, outcome, report, plan.out, plan.device)
