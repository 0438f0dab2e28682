"""`sources` parses submission files, never running them: what each binds at import time and what it imports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from grader.intake.imports import syntax_tree

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign


@dataclass
class ParsedModule:
    name: str
    tree: ast.Module
    bindings: dict[str, list[Definition]]  # each top-level name and every statement that binds it
    submission_imports: dict[str, tuple[str, str | None]]  # local name -> (submission module, attribute)
    origins: dict[str, str]  # local name -> what it was imported as ("itertools", "functools.reduce")


def parse(name: str, source: bytes) -> ParsedModule | None:
    """Submission module `name` from its source, or None when it does not parse."""
    if (tree := syntax_tree(source)) is None:
        return None
    bindings: dict[str, list[Definition]] = {}
    for node in import_time_statements(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bindings.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for bound in bound_names(target):
                    if isinstance(bound, ast.Name):
                        bindings.setdefault(bound.id, []).append(node)
    submission_imports: dict[str, tuple[str, str | None]] = {}
    origins: dict[str, str] = {}
    for node in ast.walk(tree):  # imports inside functions too: a helper can be imported where it is called
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            ours = node.level > 0 or module.split(".")[0] == "exercises"
            base = module.removeprefix("exercises").lstrip(".") if ours else module
            for alias in node.names:
                local = alias.asname or alias.name
                if ours:
                    submission_imports[local] = (base, alias.name) if base else (alias.name, None)
                else:
                    origins[local] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "exercises":
                    if alias.asname:
                        submission_imports[alias.asname] = (alias.name.split(".", 1)[-1], None)
                else:
                    origins[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
    for local in [*submission_imports, *origins]:
        bindings.pop(local, None)
    return ParsedModule(name, tree, bindings, submission_imports, origins)


def import_time_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The top-level statements, and those of class bodies, but not what `if __name__ == "__main__"` guards."""
    for node in body:
        if isinstance(node, ast.If) and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"':
            continue
        yield node
        if isinstance(node, ast.ClassDef):
            yield from (inner for inner in import_time_statements(node.body)
                        if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def imported_closure(modules: dict[str, ParsedModule], start: str) -> list[str]:
    """`start` and the submission modules it imports, directly or not."""
    seen = [start]
    for name in seen:
        for source, _ in modules[name].submission_imports.values():
            if source in modules and source not in seen:
                seen.append(source)
    return seen


def bound_names(target: ast.expr) -> list[ast.expr]:
    """What an assignment target binds: the target itself, or each element of a (nested) tuple or list."""
    return [n for element in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])
            for n in ([element] if not isinstance(element, (ast.Tuple, ast.List)) else bound_names(element))]
