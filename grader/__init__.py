"""The attention kit's autograder: student code runs in a sandboxed worker, never in the judging process.

From Python or a notebook: `grader.check("attention")`, or `%load_ext grader` then `%grader check attention`.

This package's own module is the notebook's face, the top of the grader's layers (docs/architecture.md): no module of
the grader imports it (the kit's version and folders are in `grader.kit`), and its notebook names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.kit import VERSION as __version__

__all__ = ["CheckError", "__version__", "check", "load_ipython_extension"]

if TYPE_CHECKING:
    from grader.student.jupyter import CheckError, check, load_ipython_extension


def __getattr__(name: str) -> object:
    # The notebook face is loaded on first use: every `grader` command and grading child imports this package.
    if name in ("CheckError", "check", "load_ipython_extension"):
        from grader.student import jupyter

        return getattr(jupyter, name)
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
