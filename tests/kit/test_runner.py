"""The runner turns only a run pytest finished into a grade: an interrupted or broken run is no score."""

from __future__ import annotations

import io
import types

import pytest

from grader.grade import runner


def _finished(exitcode: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(report={"exitcode": exitcode, "tests": [], "collectors": []})


def test_a_run_pytest_stopped_with_an_internal_error_is_no_grade():
    sink = io.StringIO("INTERNALERROR> Traceback\nINTERNALERROR> ImportError: cannot import name 'diagnosis'\n")
    with pytest.raises(RuntimeError, match="internal error:\nTraceback\nImportError: cannot import name 'diagnosis'"):
        runner._report(_finished(pytest.ExitCode.INTERNAL_ERROR), None, None, sink)  # type: ignore[arg-type]


def test_an_interrupted_run_is_no_grade():
    with pytest.raises(KeyboardInterrupt):
        runner._report(_finished(pytest.ExitCode.INTERRUPTED), None, None, io.StringIO())  # type: ignore[arg-type]
