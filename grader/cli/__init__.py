"""The `grader` command: parse the command line, dispatch; the work happens elsewhere, the drawing in `grader.view`."""

from grader.cli.main import main, run

__all__ = ["main", "run"]
