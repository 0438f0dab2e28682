"""`python -m grader`: the `grader` command, as the console script runs it."""

from grader.cli import run

run()
