"""`parse` reads the `grader` command line: the parser, its argument types, and the one-line usage error."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

from grader.grade.reports import HIDDEN_VISIBILITY, VISIBILITIES
from grader.grade.selection import kit_root
from grader.lang import LANGUAGES, N_, tr
from grader.text import clean

EXIT_OK, EXIT_FAIL_UNDER, EXIT_USAGE, EXIT_GRADER_FAILED = 0, 1, 2, 3
# A release is built for students, so the language of the terminal that builds it does not choose theirs.
RELEASE_LANG_HELP = ("language of the release's stubs, notebooks and student README, and of what it prints: en or zh "
                     "(default: the release in English, printed in GRADER_LANG's or the locale's language)")
UNISOLATED_HELP = ("grade the hidden tests, or with the solutions installed, even where no isolation stronger than "
                   "`none` is available (refused otherwise)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        die(tr("{message} (see `{command} --help`)", message=message, command=self.prog))


def die(message: str) -> NoReturn:
    """Print a one-line usage error and exit with 2."""
    print(f"grader: error: {clean(message, newlines=False)}", file=sys.stderr)  # it may name a file of the submission
    raise SystemExit(EXIT_USAGE)


def default_submission() -> Path:
    """What --submission defaults to: exercises/ here, else the kit's."""
    local = Path("exercises")
    return local if local.is_dir() else kit_root() / "exercises"


def existing_submission(args: argparse.Namespace) -> Path:
    """The submission --submission names (or its default), or a usage error when it does not exist."""
    submission: Path = args.submission or default_submission()
    if not submission.exists():
        die(tr("submission {path} does not exist: give a folder or a .zip with --submission",
               path=repr(str(submission))))
    return submission


def _number(text: str, *, wrong: str) -> float:
    """`text` as a number; `wrong` (a template with {text}) says what it is not."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(tr(wrong, text=repr(text))) from None


def _percent(text: str) -> float:
    value = _number(text, wrong=N_("{text} is not a number"))
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(tr("{text} is not a percentage between 0 and 100", text=text))
    return value


def _seconds(text: str) -> float:
    value = _number(text, wrong=N_("{text} is not a number of seconds"))
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(tr("{text} is not a positive number of seconds", text=text))
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(tr("{text} is not a positive whole number", text=repr(text)))
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """The `grader` parser, one sub-command per job (CONTRACT.md section 3 fixes its options)."""
    parser = _Parser(prog="grader", description="Grade attention-kit exercises in a sandbox.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = commands.add_parser("check", help="grade one submission and print a score table")
    check.add_argument("exercises", nargs="*", metavar="EXERCISE", help="exercises to grade (default: all)")
    check.add_argument("--submission", type=Path, default=None,
                       help="folder or .zip with the exercise files (default: exercises/)")
    check.add_argument("--suite", choices=("public", "hidden", "all"), default=None,
                       help="which tests to run (default: all where hidden tests are installed, else public)")
    check.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    check.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the JSON report here")
    check.add_argument("--gradescope", type=Path, default=None, metavar="PATH",
                       help="write Gradescope's results.json here")
    check.add_argument("--gradescope-hidden", choices=VISIBILITIES, default=HIDDEN_VISIBILITY, metavar="WHEN",
                       help="when students see hidden tests in results.json: visible, after_due_date, "
                            f"after_published or hidden (default {HIDDEN_VISIBILITY}); while any test is "
                            "hidden from them, Gradescope hides their total score too")
    check.add_argument("--exercism", type=Path, default=None, metavar="PATH",
                       help="write an Exercism test-runner results.json (version 3) here")
    check.add_argument("--fail-under", type=_percent, default=None, metavar="PERCENT",
                       help="exit with 1 when the score is below this percentage")
    check.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                       help="time budget for the whole run; tests left when it is used up fail (default 300)")
    check.add_argument("--quick", action="store_true",
                       help="skip slow tests (the capstone); they count as 0, so the score is a lower bound")
    check.add_argument("-v", "--verbose", action="store_true", help="list every test, not only failures")
    check.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)

    batch = commands.add_parser("batch", help="grade every sub-folder, .zip or notebook of a folder, in parallel")
    batch.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR")
    batch.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="where DIR/<id>.json, DIR/grades.csv and DIR/summary.json go")
    batch.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1, metavar="N",
                       help="submissions graded at once (default: the number of cores)")
    batch.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                       help="time budget for one whole submission (default 600)")
    batch.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch.add_argument("--suite", choices=("public", "hidden", "all"), default=None)
    batch.add_argument("--force", action="store_true", help="regrade submissions whose report is up to date")
    batch.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    batch.add_argument("--cluster", default=None, metavar="ADDRESS",
                       help="grade on a Dask cluster: a scheduler with TLS (tls://host:8786), or local:N for N workers "
                            'here (needs pip install "attention-kit[cluster]"; see docs/cluster.md)')
    batch.add_argument("--insecure-cluster", action="store_true",
                       help="let --cluster take a scheduler without TLS (tcp://, ws://, ucx://), which runs code for "
                            "anyone who reaches it: only on a network no one else can reach")

    release = commands.add_parser("release", help="build the student distribution (or the autograder bundle)")
    release.add_argument("--out", type=Path, required=True, metavar="DIR")
    release.add_argument("--autograder", action="store_true",
                         help="include the hidden tests, the solutions and Gradescope's setup.sh and run_autograder")

    listing = commands.add_parser("list", help="show the curriculum, your progress and the installed tests")
    listing.add_argument("--submission", type=Path, default=None,
                         help="whose progress to show (default: exercises/ here, else the kit's)")

    hint = commands.add_parser("hint", help="show the next hint for an exercise, from the idea to the line to write")
    hint.add_argument("exercise", metavar="EXERCISE")
    hint.add_argument("--level", type=_positive_int, default=None, metavar="N",
                      help="show hint N (default: the next one you have not seen)")

    watch = commands.add_parser("watch", help="check an exercise again every time you save a file")
    watch.add_argument("exercise", nargs="?", default=None, metavar="EXERCISE",
                       help="exercise to check (default: the first one without full marks)")
    watch.add_argument("--submission", type=Path, default=None,
                       help="folder or .zip with the exercise files (default: exercises/)")
    watch.add_argument("--full", action="store_true", help="also run the slow tests (the capstone)")
    watch.add_argument("--max-runs", type=_positive_int, default=None, help=argparse.SUPPRESS)

    show = commands.add_parser("show", help="run your attention on the course notes' example and draw its weights")
    show.add_argument("what", choices=("attention",), metavar="attention")
    show.add_argument("--submission", type=Path, default=None,
                      help="folder or .zip with the exercise files (default: exercises/)")
    show.add_argument("--png", type=Path, default=None, metavar="PATH",
                      help='also write the heat-maps as a PNG image (needs pip install -e ".[plots]")')
    for name, command in commands.choices.items():  # every command speaks the reader's language
        command.add_argument("--lang", choices=LANGUAGES, default=None,
                             help=RELEASE_LANG_HELP if name == "release" else
                             "language of what it prints: en or zh (default: GRADER_LANG, then the locale)")
    return parser
