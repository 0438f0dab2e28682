"""`uses` follows a notebook's `%grader use` lines: the notebooks a student's own check takes in with it.

For the student's own kernel and own check (`grader.student.jupyter`); grading never follows these lines.
"""

from __future__ import annotations

from pathlib import Path

from grader.intake import notebook
from grader.intake.submission import SubmissionInputError, read_notebook


def used_notebooks(names: list[str], folder: Path, *, seen: set[Path]) -> tuple[list[Path], list[str]]:
    """The notebooks `%grader use NAMES` means, in `folder`, each after those it uses itself; and the names not
    found there (symbolic links are not followed). `seen` (resolved paths) are left out, and grow."""
    found: list[Path] = []
    missing: list[str] = []
    for name in names:
        path = folder / (name if name.endswith(".ipynb") else f"{name}.ipynb")
        if path.resolve() in seen:
            continue
        if not path.is_file() or path.is_symlink():
            missing.append(path.name)
            continue
        seen.add(path.resolve())
        inner, lost = used_notebooks(uses_of(path), folder, seen=seen)
        found += [*inner, path]
        missing += lost
    return found, missing


def uses_of(path: Path) -> list[str]:
    """What the `%grader use` lines of the notebook at `path` name; none where it cannot be read."""
    try:
        return notebook.uses(notebook.cells(read_notebook(path), name=path.name))
    except (notebook.NotebookError, SubmissionInputError):
        return []
