"""`unsaved` tells when a notebook's kernel ran definitions its saved notebook does not hold (see `jupyter`).

A check grades the notebook as saved. A student who fixes a cell, runs it and forgets to save sees the right
numbers in the kernel and the old code's grade: the check says so in one line, but only where the evidence allows
no other reading. The kernel's record is IPython's history (the code of each execution, by its number); the saved
notebook's, each code cell's code and the execution count Jupyter saved beside it. Every save writes the counts
the cells then show: a notebook saved after the kernel ran a cell as execution `n` holds a count of `n` or more
(that cell's, or a later one's). So a definition the kernel last ran as execution `n`, found in no saved cell, in a
notebook whose counts are all below `n` (or that was saved before this kernel started, so that its counts are
another kernel's), was run after the last save: saving is what is missing. A cell edited and saved but not run
again leaves a count of `n` or more, and nothing is said: the check graded what the student sees.

Definitions are compared as `ast` has them (the code, not its comments or spacing); the names compared are the
contract names of the exercises graded and the helpers they use. Nothing here runs the notebook's code.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.curriculum import BY_ID
from grader.intake import notebook
from grader.lang import listed, tr


@dataclass(frozen=True)
class SavedCell:
    source: str
    count: int | None  # its execution count as saved (None: not run when saved, or its outputs cleared)


def saved_cells(data: bytes) -> list[SavedCell]:
    """The code cells of the notebook `data` as saved; none where it cannot be read."""
    try:
        cells = json.loads(data.decode("utf-8")).get("cells", [])
        return [SavedCell("".join(cell.get("source", "")) if isinstance(cell.get("source"), list)
                          else str(cell.get("source", "")), cell.get("execution_count")
                          if isinstance(cell.get("execution_count"), int) else None)
                for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]
    except (ValueError, AttributeError, TypeError):
        return []


def unsaved(ran: Sequence[str], saved: Sequence[SavedCell], names: Iterable[str], *,
            saved_before_kernel: bool = False) -> list[str]:
    """Of `names` (and the helpers their definitions use), those whose definition this kernel last ran after the
    notebook was last saved and that no saved cell holds. `ran[n]` is the code the kernel ran as execution `n`
    (`ran[0]` is unused, as in IPython's `In`); `saved_before_kernel`: the notebook was saved before this kernel
    started, so its counts are another kernel's."""
    last_save = 0 if saved_before_kernel else max((cell.count or 0 for cell in saved), default=0)
    in_kernel: dict[str, tuple[int, ast.stmt]] = {}
    for number, code in enumerate(ran):
        for name, statement in notebook.definitions(code).items():
            in_kernel[name] = (number, statement)
    in_notebook: dict[str, list[ast.stmt]] = {}
    for cell in saved:
        for name, statement in notebook.definitions(cell.source).items():
            in_notebook.setdefault(name, []).append(statement)
    found: list[str] = []
    todo, seen = list(names), set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        versions = [*in_notebook.get(name, []), *([in_kernel[name][1]] if name in in_kernel else [])]
        todo += sorted({node.id for version in versions for node in ast.walk(version) if isinstance(node, ast.Name)
                        and (node.id in in_kernel or node.id in in_notebook)})
        if name not in in_kernel:
            continue  # never run here: a cell saved but not run is not the kernel differing
        number, statement = in_kernel[name]
        if number > last_save and ast.dump(statement) not in {ast.dump(other) for other in in_notebook.get(name, [])}:
            found.append(name)
    return found


def kernel_note(path: Path, exercise_ids: Iterable[str]) -> str | None:
    """The one line that says this kernel ran definitions of `exercise_ids` the saved notebook at `path` does not
    hold (see the module), or None: outside IPython, where it cannot tell, and where they agree."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        ran = list(shell.history_manager.input_hist_raw) if shell is not None else []
        data = path.read_bytes()
        saved_before_kernel = path.stat().st_mtime < _kernel_started()
    except Exception:  # no kernel, no history, no notebook: nothing can be said
        return None
    names = [name for exercise_id in exercise_ids if exercise_id in BY_ID for name in BY_ID[exercise_id].names]
    found = unsaved(ran, saved_cells(data), names, saved_before_kernel=saved_before_kernel)
    if not found:
        return None
    return tr("this kernel ran code that is not saved in {notebook} (the definition of {names}): the check graded "
              "the notebook as saved; save it (Ctrl-S), then check again", notebook=path.name, names=listed(found))


def _kernel_started() -> float:
    """When this kernel's process started (a little earlier, never later: Linux counts from a boot time in whole
    seconds), as `time.time()` counts."""
    import psutil

    return psutil.Process().create_time()
