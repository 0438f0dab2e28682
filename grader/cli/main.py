"""`main` is the `grader` command: parse the command line, dispatch to a command, turn failures into exit codes.

Exit codes: 0 grading completed (whatever the score), 1 --fail-under not met, 2 bad usage or input,
3 the grader itself failed (in `grader batch`: on any submission, after every report was written).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

from rich.console import Console

from grader import lang, settings
from grader.cli import grading, learning
from grader.cli.parse import EXIT_GRADER_FAILED, asked_language, build_parser, speaking
from grader.host.limits import WorkerStartError
from grader.text import clean, tolerant_output

COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "check": grading.check_command,
    "batch": grading.batch_command,
    "release": grading.release_command,
    "list": learning.list_command,
    "hint": learning.hint_command,
    "watch": learning.watch_command,
    "show": learning.show_command,
}


def main(argv: list[str] | None = None) -> int:
    """Run one `grader` command; returns its exit code (usage errors exit with 2 from here)."""
    argv = sys.argv[1:] if argv is None else argv
    lang.use(lang.choose(asked_language(argv)))  # --help and usage errors are printed while parsing
    with speaking(lang.current()):
        args = build_parser().parse_args(argv)
    # emoji=False: a submission's text (a message, a file name) must not turn `:thumbs_up:` into a picture.
    return COMMANDS[args.command](args, Console(stderr=False, highlight=False, emoji=False))


def run() -> None:
    """The console script: `main` with OMP_NUM_THREADS=1, SIGTERM as Ctrl-C, and one line for any failure."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tolerant_output()
    # SIGTERM (a batch's time budget, a CI job cancelled) unwinds like Ctrl-C, so that the worker's
    # whole process tree is killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        code = main()
    except KeyboardInterrupt:
        print("grader: " + lang.tr("interrupted"), file=sys.stderr)
        code = 130
    except WorkerStartError as error:  # the sandbox, never the submission: a failure of this machine or the kit
        print("grader: " + lang.tr("the grader itself failed: {error}", error=clean(str(error), newlines=False)),
              file=sys.stderr)
        code = EXIT_GRADER_FAILED
    except Exception as error:
        if settings.debug():
            raise
        print(f"grader: internal error: {clean(f'{type(error).__name__}: {error}', newlines=False)} "
              "(set GRADER_DEBUG=1 for details)",
              file=sys.stderr)
        code = EXIT_GRADER_FAILED
    sys.exit(code)
