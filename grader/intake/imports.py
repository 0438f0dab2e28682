"""`syntax_tree` reads a submission's file as the trusted side may, never running it; `exercise_imports` uses it for
the exercise files each exercise file imports as it is imported.

The trusted side imports those first, one at a time (grader.host.connection), so that a file that never finishes
importing (an endless loop at its top level) costs one timeout per grading, and every exercise that imports it is
told so instead of timing out again. Only what runs at import counts: the module's own statements and its classes'
bodies, not the bodies of functions.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping


def syntax_tree(source: bytes | str) -> ast.Module | None:
    """The file's syntax tree, or None where it does not parse: a syntax error, a null byte, or nesting past the
    parser's depth (which raises RecursionError or MemoryError, and must cost the submission, never the grader)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def exercise_imports(files: Mapping[str, bytes], modules: Collection[str]) -> dict[str, tuple[str, ...]]:
    """For each file `<module>.py` of `files`, the other `modules` it imports at its top level, in order."""
    found = {}
    for file, data in files.items():
        module = file.removesuffix(".py")
        if (tree := syntax_tree(data)) is None:  # the worker's import says what is wrong with it
            continue
        names = [name for name in _imported(tree.body) if name in modules and name != module]
        found[module] = tuple(dict.fromkeys(names))
    return found


def _imported(body: list[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.ImportFrom):
            if node.level > 0 or node.module == "exercises":  # from .x import y, from . import x, from exercises ...
                if node.module and node.level > 0:
                    yield node.module.split(".")[0]
                else:
                    yield from (alias.name for alias in node.names)
            elif node.module and node.module.startswith("exercises."):
                yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".")[1] for alias in node.names if alias.name.startswith("exercises."))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # if, try, with, for, while, class
            for block in _blocks(node):
                yield from _imported(block)


def _blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    yield from (handler.body for handler in getattr(node, "handlers", ()))
    yield from (case.body for case in getattr(node, "cases", ()))
