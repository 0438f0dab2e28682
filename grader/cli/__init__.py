"""The `grader` command: parse the command line, dispatch, render; the work happens elsewhere."""

from grader.cli.main import main, run

__all__ = ["main", "run"]
