"""`grading` runs the instructor's and CI's commands: `check` one submission, `batch` a class, `release` the kit."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from grader import lang, settings
from grader.cli.class_summary import render_summary
from grader.cli.parse import EXIT_FAIL_UNDER, EXIT_GRADER_FAILED, EXIT_OK, EXIT_USAGE, die, existing_submission
from grader.grade.reports import GradeReport, to_exercism, to_gradescope, write_json
from grader.grade.selection import Selection, UsageError, select
from grader.host import portable, tiers
from grader.host.limits import Limits
from grader.host.session import GradingSession, refuse_unavailable_device, resolve_device
from grader.host.tiers import IsolationRefused
from grader.intake.submission import SubmissionInputError
from grader.lang import tr
from grader.student import state
from grader.text import clean
from grader.view.render import render


def check_command(args: argparse.Namespace, console: Console) -> int:
    """`grader check`: grade one submission, record it for `grader list`, write the reports asked for, render."""
    submission = existing_submission(args)
    try:
        selection = select(args.exercises, args.suite, track=args.track)
        # Opening the session starts the worker first; the imports below then overlap with its own.
        session = GradingSession.open(submission, device=args.device, protect=tiers.exposure(selection.suite),
                                      allow_unisolated=args.allow_unisolated, seed=args.seed,
                                      salt=settings.salt())
    except (UsageError, SubmissionInputError, ValueError, IsolationRefused) as error:
        die(str(error))
    from grader.grade import runner

    report = _grade(runner, session, selection, console, quick=args.quick, timeout_s=args.timeout)
    if not state.record_report(report, submission, quick=args.quick):
        console.print(f"[dim]{escape(state.unsaved())}[/]")
    try:
        if args.json:
            write_json(report.to_json(), args.json)
        if args.gradescope:
            write_json(to_gradescope(report, hidden_visibility=args.gradescope_hidden), args.gradescope)
        if args.exercism:
            write_json(to_exercism(report), args.exercism)
    except OSError as error:
        die(tr("cannot write the report: {error}", error=error))
    render(report, console, verbose=args.verbose, files=session.submission)
    if args.fail_under is not None and report.percent < args.fail_under:
        console.print("[red]" + tr("Score {percent}% is under --fail-under {bound}%.", percent=report.percent_shown,
                                   bound=f"{args.fail_under:g}") + "[/]")
        return EXIT_FAIL_UNDER
    return EXIT_OK


def _grade(
    runner: ModuleType, session: GradingSession, selection: Selection, console: Console, *, quick: bool,
    timeout_s: float,
) -> GradeReport:
    if not console.is_terminal:
        return runner.grade(session, selection, quick=quick, timeout_s=timeout_s)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        name = escape(clean(session.path.name or str(session.path), newlines=False))
        task = progress.add_task(tr("Grading {name}", name=name), total=None)
        return runner.grade(
            session, selection, quick=quick, timeout_s=timeout_s,
            on_start=lambda total: progress.update(task, total=total),
            on_test=lambda nodeid, outcome: progress.advance(task),
        )


def batch_command(args: argparse.Namespace, console: Console) -> int:
    """`grader batch`: grade every submission of a folder with a progress bar, then render the class summary."""
    from grader import batch
    from grader.batch import cluster, dask_client

    if not args.submissions.is_dir():
        die(tr("{path} is not a folder: give the folder that holds the submissions", path=repr(str(args.submissions))))
    if args.timeout <= 0:
        die(tr("--timeout must be a positive number of seconds"))
    try:
        selection = select(None, args.suite, track=args.track)
        # The slots resolve "auto" for themselves: this process imports torch (a second) only to refuse a --device
        # cuda the machine lacks, once, as a usage error.
        refuse_unavailable_device(args.device)
        if args.device == "cuda":
            resolve_device(args.device)
        limits = Limits.from_environment()  # read here, once: every job carries them to its slot or cluster worker
        # Other students' submissions and the reports are secrets too, kept from each sandbox as the kit is.
        tiers.protect(args.submissions)
        tiers.protect(args.out)
        protect = tiers.exposure(selection.suite) or "other students' submissions are graded here"
        if args.cluster is None and portable.wanted():
            raise ValueError(tr("grader batch grades on Linux only, and workers are spawned here ({why}): run it on "
                                "a Linux machine or in a Linux container, or with --cluster on Linux workers",
                                why=portable.reason()))
        if args.cluster is None:
            tiers.refuse_unless_isolated(why=protect, allowed=args.allow_unisolated)
        else:  # no submission runs here: each worker's own isolation is checked when the batch starts
            dask_client.ready(args.cluster, insecure=args.insecure_cluster)
        isolation = batch.Isolation(secrets=[str(args.submissions.resolve()), str(args.out.resolve())],
                                    protect=protect, allow_unisolated=args.allow_unisolated, sandbox=tiers.requested())
    except (UsageError, ValueError, IsolationRefused, dask_client.ClusterError) as error:
        die(str(error))
    # --out may lie inside SUBMISSIONS_DIR (`grader batch . --out grades`): the reports are no student's.
    entries = [e for e in batch.discover(args.submissions) if e.path.resolve() != args.out.resolve()]
    if not entries:
        die(tr("no sub-folders, .zip files or notebooks in {path}", path=repr(str(args.submissions))))
    if args.out.exists() and not args.out.is_dir():
        die(tr("--out {path} exists and is not a folder", path=repr(str(args.out))))
    plan = batch.Plan(args.out, selection, args.device, args.timeout, jobs=args.jobs, force=args.force,
                      isolation=isolation, cluster=args.cluster, insecure_cluster=args.insecure_cluster,
                      salt=settings.salt(), language=lang.current(), limits=limits)
    counts = {"done": 0, "not graded": 0, "skipped": 0}
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[counts]}"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("Grading", total=len(entries), counts="")

        def on_result(result: batch.Result) -> None:
            kind = {batch.Status.GRADED: "done", batch.Status.SKIPPED: "skipped"}.get(result.status, "not graded")
            counts[kind] += 1
            progress.update(task, advance=1, counts=" · ".join(f"{n} {k}" for k, n in counts.items() if n))

        def say(line: str) -> None:
            progress.console.print(line, soft_wrap=True, markup=False, highlight=False)

        try:
            results = batch.run(entries, plan, on_result=on_result, say=say)
        except dask_client.ClusterError as error:
            die(str(error))
        except cluster.ClusterLost:
            print(tr("grader: the Dask scheduler at {address} went away: {done} of {total} reports are written in "
                     "{out}; start it again, and its workers (they exit with it), then run the same command to grade "
                     "the rest", address=args.cluster,
                     done=sum(counts.values()), total=len(entries), out=str(args.out)), file=sys.stderr)
            return EXIT_USAGE  # a condition of the machine the user fixes, as the line says: never exit 3
    summary = batch.summarise(results, selection)
    render_summary(summary, console, args.out)
    if counts["skipped"]:  # on stderr: a rerun's summary and report stay those of an uninterrupted run
        Console(stderr=True, highlight=False, emoji=False).print(
            f"{counts['skipped']} of {len(results)} submissions were graded by an earlier run of this batch and are "
            "unchanged: not graded again (--force grades them again)", soft_wrap=True)
    return _batch_exit(summary.statuses["grader-error"], summary.submissions)


def _batch_exit(failed: int, submissions: int) -> int:
    """Exit 3 when the grader failed on any submission (docs/contract.md#exit-codes), every report written by now.

    A class of zeros must not pass for a finished batch in a script: a rerun grades those submissions again.
    """
    if not failed:
        return EXIT_OK
    print(f"grader: {failed} of {submissions} submissions ended grader-error (the grader failed, not the "
          "submission; each report says why): run the same command again to grade them", file=sys.stderr)
    return EXIT_GRADER_FAILED


def release_command(args: argparse.Namespace, console: Console) -> int:
    """`grader release`: build the student distribution, or with --autograder the Gradescope bundle.

    The release is written in --lang's language, or in English when it is not given: it is built for students,
    so the language of the instructor's terminal (which picks what this command prints) does not choose it.
    """
    import shlex

    from grader.release import ReleaseError, build

    language = args.lang or "en"
    try:
        written = build(args.out, autograder=args.autograder, language=language, track=args.track)
    except ReleaseError as error:
        die(str(error))
    out = escape(str(args.out))
    if args.autograder:
        console.print(tr("Wrote the autograder bundle to {out} ({count} files).", out=out, count=len(written)))
    else:
        console.print(tr("Wrote the student distribution to {out} ({count} files).", out=out, count=len(written)))
    if language == "zh":
        console.print(tr("Its stubs and notebooks are in Chinese."))
        if not args.autograder:
            console.print(tr("Its README is in Chinese too, and shows students how to have the grader speak Chinese "
                             "(GRADER_LANG=zh)."))
    else:
        console.print(tr("Its stubs and notebooks are in English; `--lang zh` writes them in Chinese."))
    console.print(tr("GitHub Actions: .github/workflows/grade.yml grades exercises/ on every push."))
    if args.autograder:
        console.print(tr("Gradescope: setup.sh and run_autograder are at its top (see docs/gradescope.md). Upload: zip "
                         "the folder's contents, not the folder, and upload the zip:"))
        console.print(escape(f"  (cd {shlex.quote(str(args.out))} && zip -r ../autograder.zip .)"), soft_wrap=True)
    return EXIT_OK
