"""`stubs` knows the kit's untouched exercise files, in each language: a stub handed in holds no work of its own.

A student who works in the notebooks leaves exercises/ as it came; handed in together (the whole repository, as
the Actions workflow grades it), the notebooks' definitions stand in for an untouched stub, never the other way.

In a release, exercises/ is the student's to fill: the stubs are the copies `grader release` kept of what it shipped
(SHIPPED), never the files there, else a student's work in the repository the workflow grades would count as the stub.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

from grader.intake.imports import syntax_tree
from grader.lang import KIT

SHIPPED = Path("grader/locale/release-stubs.json")  # in a release: {file name: the stub it shipped}; the kit has none


def untouched(name: str, data: bytes) -> bool:
    """Whether `data` is the kit's stub `name` as it ships, in any language (line endings aside)."""
    return _plain(data) in _stubs(name)


@functools.cache
def _stubs(name: str) -> frozenset[bytes]:
    try:
        shipped = json.loads((KIT / SHIPPED).read_text(encoding="utf-8"))
    except OSError:  # the kit, whose exercises/ are the stubs
        shipped = None
    if shipped is not None:
        return frozenset({_plain(shipped[name].encode("utf-8"))} if name in shipped else ())
    places = [KIT / "exercises" / name, *sorted((KIT / "grader" / "locale").glob(f"*/exercises/{name}"))]
    found = set()
    for place in places:
        try:
            found.add(_plain(place.read_bytes()))
        except OSError:
            continue
    return frozenset(found)


def _plain(data: bytes) -> bytes:
    return b"\n".join(line.rstrip() for line in data.replace(b"\r\n", b"\n").split(b"\n")).strip()


def only_stub_code(name: str, data: bytes) -> bool:
    """Whether every definition in `data` (an exercise file made from notebooks) is one of the stub's own, as the
    generated notebooks hold them: no work stands in for the stub then."""
    made = _definitions(data)
    return bool(made) and any(made <= _definitions(stub) for stub in _stubs(name))


def _definitions(source: bytes) -> frozenset[str]:
    """The file's top-level functions and classes, their docstrings left out (a notebook's are in its language)."""
    if (tree := syntax_tree(source)) is None:
        return frozenset()
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for inner in ast.walk(node):
                body = getattr(inner, "body", None)
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body and isinstance(
                        body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    inner.body = body[1:] or [ast.Pass()]
            found.add(ast.dump(node))
    return frozenset(found)
