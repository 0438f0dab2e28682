"""Graded suites (tests/public, tests/hidden) get their fixtures from the grader's pytest plugin."""

pytest_plugins = ["grader.judge.plugin"]
