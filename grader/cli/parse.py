"""`parse` reads the `grader` command line: the parser, its argument types, and the one-line usage error."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from grader.curriculum import TRACKS
from grader.grade.reports import HIDDEN_VISIBILITY, VISIBILITIES
from grader.kit import kit_root
from grader.lang import LANGUAGES, N_, argparse_translations, tr
from grader.text import clean
from grader.view.breaking import breaks

EXIT_OK, EXIT_FAIL_UNDER, EXIT_USAGE, EXIT_GRADER_FAILED = 0, 1, 2, 3
# A release is built for students, so the language of the terminal that builds it does not choose theirs.
RELEASE_LANG_HELP = N_("language of the release's stubs, notebooks and student README, and of what it prints: en or zh "
                     "(default: the release in English, printed in GRADER_LANG's or the locale's language)")
TRACK_IDS = tuple(track.id for track in TRACKS)
UNISOLATED_HELP = N_("grade the hidden tests, or with the solutions installed, even where no isolation stronger than "
                   "`none` is available (refused otherwise)")


class _Formatter(argparse.HelpFormatter):
    """`--help` in the reader's language: each help text and description is a catalog message (marked with `N_`),
    translated as it is shown; argparse's own words ("usage: ", "options") come from its domain (`speaking`)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return tr(action.help) if action.help else action.help

    def _format_text(self, text: str) -> str:
        return super()._format_text(tr(text))

    def _split_lines(self, text: str, width: int) -> list[str]:
        # argparse's textwrap counts characters, and breaks only at spaces: a Chinese character takes two cells.
        text = " ".join(text.split())
        offsets = [0, *breaks(text, width), len(text)]
        return [text[start:end].strip() for start, end in itertools.pairwise(offsets)]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line for line in self._split_lines(text, width))

    def format_help(self) -> str:
        # argparse ends each heading with ":"; after Chinese words the colon is full-width.
        return re.sub(r"(?<=[\u4e00-\u9fff]):$", "：", super().format_help(), flags=re.M)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        die(tr("{message} (see `{command} --help`)", message=message, command=self.prog))


@contextlib.contextmanager
def speaking(language: str) -> Iterator[None]:
    """argparse's own messages in `language` while the command line is built and read: argparse looks its words up
    with its module's `_` and `ngettext` (gettext's, on the global domain), put back on the way out."""
    translations = argparse_translations(language)
    saved = argparse._, argparse.ngettext  # type: ignore[attr-defined]
    argparse._, argparse.ngettext = translations.gettext, translations.ngettext  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]


def asked_language(argv: Sequence[str]) -> str | None:
    """The --lang a command line gives, read before it is parsed: `--help` and usage errors print while parsing."""
    for index, word in enumerate(argv):
        value = word.removeprefix("--lang=") if word.startswith("--lang=") else (
            argv[index + 1] if word == "--lang" and index + 1 < len(argv) else None)
        if value in LANGUAGES:
            return value
    return None


def die(message: str) -> NoReturn:
    """Print a one-line usage error and exit with 2."""
    # The message may name a file of the submission.
    print("grader: " + tr("error: {message}", message=clean(message, newlines=False)), file=sys.stderr)
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


def _seed(text: str) -> int:
    if not text.isdigit() or int(text) >= 2**63:
        raise argparse.ArgumentTypeError(tr("{text} is not a seed: a whole number from 0 to 2**63 - 1, as a report's "
                                            "`\"seed\"`", text=repr(text)))
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """The `grader` parser, one sub-command per job (docs/contract.md#the-command-line fixes its options)."""
    parser = _Parser(prog="grader", description=N_("Grade attention-kit exercises in a sandbox."))
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = commands.add_parser("check", help=N_("grade one submission and print a score table"))
    check.add_argument("exercises", nargs="*", metavar="EXERCISE",
                       help=N_("exercises to grade (default: all of the track)"))
    check.add_argument("--track", choices=TRACK_IDS, default=None,
                       help=N_("the track to grade (default: the track of the exercises named, else transformer)"))
    check.add_argument("--submission", type=Path, default=None,
                       help=N_("folder or .zip with the exercise files (default: exercises/)"))
    check.add_argument("--suite", choices=("public", "hidden", "all"), default=None,
                       help=N_("which tests to run (default: all where hidden tests are installed, else public)"))
    check.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    check.add_argument("--json", type=Path, default=None, metavar="PATH", help=N_("write the JSON report here"))
    check.add_argument("--gradescope", type=Path, default=None, metavar="PATH",
                       help=N_("write Gradescope's results.json here"))
    check.add_argument("--gradescope-hidden", choices=VISIBILITIES, default=HIDDEN_VISIBILITY, metavar="WHEN",
                       help=N_("when students see hidden tests in results.json: visible, after_due_date, "
                            "after_published or hidden (default %(default)s); while any test is "
                            "hidden from them, Gradescope hides their total score too"))
    check.add_argument("--exercism", type=Path, default=None, metavar="PATH",
                       help=N_("write an Exercism test-runner results.json (version 3) here"))
    check.add_argument("--fail-under", type=_percent, default=None, metavar="PERCENT",
                       help=N_("exit with 1 when the score is below this percentage"))
    check.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                       help=N_("time budget for the whole run; tests left when it is used up fail (default 300)"))
    check.add_argument("--quick", action="store_true",
                       help=N_("skip slow tests (the capstone); they count as 0, so the score is a lower bound"))
    check.add_argument("--seed", type=_seed, default=None, metavar="N",
                       help=N_("draw every input from this seed, the one a report records, to reproduce it (default: "
                               "derived from the submission's files, the kit's version and `GRADER_SALT`)"))
    check.add_argument("-v", "--verbose", action="store_true", help=N_("list every test, not only failures"))
    check.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)

    batch = commands.add_parser("batch", help=N_("grade every sub-folder, .zip or notebook of a folder, in parallel"))
    batch.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR")
    batch.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help=N_("where DIR/<id>.json, DIR/grades.csv and DIR/summary.json go"))
    batch.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1, metavar="N",
                       help=N_("submissions graded at once (default: the number of cores)"))
    batch.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                       help=N_("time budget for one whole submission (default 600)"))
    batch.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch.add_argument("--suite", choices=("public", "hidden", "all"), default=None)
    batch.add_argument("--track", choices=TRACK_IDS, default=None, help=N_("the track to grade (default: transformer)"))
    batch.add_argument("--force", action="store_true", help=N_("regrade submissions whose report is up to date"))
    batch.add_argument("--allow-unisolated", action="store_true", help=UNISOLATED_HELP)
    batch.add_argument("--cluster", default=None, metavar="ADDRESS",
                       help=N_("grade on a Dask cluster: a scheduler with TLS (tls://host:8786), or local:N for N "
                               'workers here (needs pip install "attention-kit[cluster]"; see docs/cluster.md)'))
    batch.add_argument("--insecure-cluster", action="store_true",
                       help=N_("let --cluster take a scheduler without TLS (tcp://, ws://, ucx://), which runs code "
                               "for anyone who reaches it: only on a network no one else can reach"))

    release = commands.add_parser("release", help=N_("build the student distribution (or the autograder bundle)"))
    release.add_argument("--out", type=Path, required=True, metavar="DIR")
    release.add_argument("--track", choices=TRACK_IDS, default=TRACK_IDS[0],
                         help=N_("the track to release, with the exercises it builds on (default: transformer)"))
    release.add_argument("--autograder", action="store_true",
                         help=N_("include the hidden tests, the solutions and Gradescope's setup.sh and "
                                 "run_autograder"))

    listing = commands.add_parser("list", help=N_("show the curriculum, your progress and the installed tests"))
    listing.add_argument("--track", choices=TRACK_IDS, default=None,
                         help=N_("the track to show (default: transformer, or a release's own)"))
    listing.add_argument("--submission", type=Path, default=None,
                         help=N_("whose progress to show (default: exercises/ here, else the kit's)"))

    hint = commands.add_parser("hint",
                               help=N_("show the next hint for an exercise, from the idea to the line to write"))
    hint.add_argument("exercise", metavar="EXERCISE")
    hint.add_argument("--level", type=_positive_int, default=None, metavar="N",
                      help=N_("show hint N (default: the next one you have not seen)"))

    watch = commands.add_parser("watch", help=N_("check an exercise again every time you save a file"))
    watch.add_argument("exercise", nargs="?", default=None, metavar="EXERCISE",
                       help=N_("exercise to check (default: the first one without full marks)"))
    watch.add_argument("--submission", type=Path, default=None,
                       help=N_("folder or .zip with the exercise files (default: exercises/)"))
    watch.add_argument("--track", choices=TRACK_IDS, default=None,
                       help=N_("the track to watch (default: the exercise's, else transformer or a release's own)"))
    watch.add_argument("--full", action="store_true", help=N_("also run the slow tests (the capstone)"))
    watch.add_argument("--max-runs", type=_positive_int, default=None, help=argparse.SUPPRESS)

    show = commands.add_parser("show", help=N_("run your attention on the course notes' example and draw its weights"))
    show.add_argument("what", choices=("attention",), metavar="attention")
    show.add_argument("--submission", type=Path, default=None,
                      help=N_("folder or .zip with the exercise files (default: exercises/)"))
    show.add_argument("--png", type=Path, default=None, metavar="PATH",
                      help=N_('also write the heat-maps as a PNG image (needs pip install -e ".[plots]")'))
    for name, command in commands.choices.items():  # every command speaks the reader's language
        command.add_argument("--lang", choices=LANGUAGES, default=None,
                             help=RELEASE_LANG_HELP if name == "release" else
                             N_("language of what it prints: en or zh (default: GRADER_LANG, then the locale)"))
    return parser
