"""`scopes` holds what a name means where the submission uses it, and the units of code the loop reader reads."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from grader.judge.loops.vocabulary import COMPREHENSIONS, DEFINITIONS, FUNCTIONS

# --- what a name means where it is used ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Imported:
    """What an import binds: a library object ("torch.nn.functional") or a submission module or one of its names."""

    line: int
    library: str | None = None
    module: str | None = None
    attribute: str | None = None


Binding = ast.AST | _Imported


class _Scope:
    """The names one module, class, function or comprehension binds itself, and the scope it sits in."""

    def __init__(self, node: ast.AST, module: _Module, parent: _Scope | None, names: dict[str, list[Binding]],
                 *, receiver: str | None = None) -> None:
        self.node, self.module, self.parent, self.names = node, module, parent, names
        self.receiver = receiver  # a method's `self`: its attributes are the class's, all of which are read

    def resolve(self, name: str) -> tuple[_Scope | None, list[Binding]]:
        """The scope that binds `name` as seen from here (Python's rule: a class body is not seen by the functions
        and comprehensions inside it), and its bindings; (None, []) for a builtin."""
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names and (scope is self or not isinstance(scope.node, ast.ClassDef)):
                return scope, scope.names[name]
            scope = scope.parent
        return None, []

    def parameter(self, name: str) -> bool:
        """Whether `name`, here, is a function's parameter that nothing in the function binds again."""
        scope, bindings = self.resolve(name)
        return scope is not None and isinstance(scope.node, FUNCTIONS) and len(bindings) == 1 \
            and isinstance(bindings[0], ast.arg)


class _Module:
    def __init__(self, name: str, tree: ast.Module) -> None:
        self.name, self.tree, self.file = name, tree, f"{name}.py"
        self.scope = _Scope(tree, self, None, _bindings(tree.body))


def _imported(statement: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, _Imported]:
    """The local name an import binds and what it binds it to (`sources.parse`'s reading of submission imports)."""
    line = statement.lineno
    if isinstance(statement, ast.ImportFrom):
        module = statement.module or ""
        local = alias.asname or alias.name
        if statement.level > 0 or module.split(".")[0] == "exercises":
            base = module.removeprefix("exercises").lstrip(".")
            return local, (_Imported(line, module=base, attribute=alias.name) if base else
                           _Imported(line, module=alias.name))
        return local, _Imported(line, library=f"{module}.{alias.name}")
    if alias.name.split(".")[0] == "exercises":
        submodule = alias.name.split(".", 1)[-1] if "." in alias.name and alias.asname else None
        return alias.asname or "exercises", _Imported(line, module=submodule)
    if alias.asname:
        return alias.asname, _Imported(line, library=alias.name)
    return alias.name.split(".")[0], _Imported(line, library=alias.name.split(".")[0])


def _bindings(body: Iterable[ast.AST], *, parameters: ast.arguments | None = None) -> dict[str, list[Binding]]:
    """Each name that `body` binds in its own scope, with what binds it (a def or class, the assignment statement,
    an import, a parameter); not what the functions, classes and comprehensions inside it bind."""
    found: dict[str, list[Binding]] = {}
    if parameters is not None:
        for arg in [*parameters.posonlyargs, *parameters.args, parameters.vararg, *parameters.kwonlyargs,
                    parameters.kwarg]:
            if arg is not None:
                found.setdefault(arg.arg, []).append(arg)

    def visit(node: ast.AST, statement: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            statement = node
        if isinstance(node, DEFINITIONS):
            found.setdefault(node.name, []).append(node)
            return
        if isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    local, imported = _imported(node, alias)
                    found.setdefault(local, []).append(imported)
            return
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.setdefault(node.id, []).append(statement)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.setdefault(node.name, []).append(statement)
        for child in ast.iter_child_nodes(node):
            visit(child, statement)

    for node in body:
        visit(node, node)
    return found


def _comprehension_scope(node: ast.AST, parent: _Scope) -> _Scope:
    names: dict[str, list[Binding]] = {}
    for generator in node.generators:
        for target in ast.walk(generator.target):
            if isinstance(target, ast.Name):
                names.setdefault(target.id, []).append(node)
    return _Scope(node, parent.module, parent, names)

# --- the reader ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """Something the reader reads once: a module's import-time code, a function's body, a class (its methods, its
    bases) or a module-level value; `scope` is where it sits."""

    node: ast.AST
    scope: _Scope
    name: str
    receiver: str | None = None


def _method(node: ast.FunctionDef, owner: ast.ClassDef, scope: _Scope) -> _Unit:
    """A method's body, to be read with its receiver (`self`, `cls`; none for a static method)."""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    arguments = [*node.args.posonlyargs, *node.args.args]
    receiver = arguments[0].arg if arguments and not static else None
    return _Unit(node, scope, name=f"{owner.name}.{node.name}", receiver=receiver)



def _chain(node: ast.expr) -> tuple[ast.Name, list[str]] | None:
    """`a.b.c` as (the name a, ["b", "c"]); None unless the expression is a name with attributes."""
    attributes: list[str] = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node, attributes[::-1]) if isinstance(node, ast.Name) else None


def _named_lambda(node: ast.AST) -> bool:
    """`name = lambda ...`: a function by another spelling, called by its name like a def."""
    return isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
        and isinstance(node.value, ast.Lambda)
