"""`loops` reads a submission's source, in the trusted process, for Python-level loops in one function.

The vectorisation tests count the aten operations a call dispatches, but that count is taken in the
worker, where the submission can rewrite the counting code. This module is the part of the verdict
the submission cannot reach: it parses the submitted files (never runs them) and follows the function
through every helper it calls in the submission, looking for a loop, a comprehension, recursion, or
anything that would hide one from a reader (exec, map, reduce, a decorator, patching at import).
A function passes only if the source shows it plainly has none.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

LOOPS = {
    ast.For: "a for loop", ast.AsyncFor: "a for loop", ast.While: "a while loop",
    ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
}
# Calls that run a function once per element, or run code the parser cannot see.
HIDDEN = {"map", "filter", "reduce", "accumulate", "starmap", "exec", "eval", "compile", "__import__", "setattr",
          "import_module"}


@dataclass(frozen=True)
class Module:
    name: str
    tree: ast.Module
    defs: dict[str, ast.AST]  # top-level functions, classes, and names assigned a value (a lambda, say)
    imports: dict[str, tuple[str, str | None]]  # local name -> (submission module, its attribute or None)


def python_loops(files: dict[str, bytes], module: str, function: str) -> list[str]:
    """What in `module.function`, or a submission function it calls, loops in Python; [] when nothing does."""
    modules = {name.removesuffix(".py"): parsed for name, source in files.items()
               if name.endswith(".py") and (parsed := _parse(name.removesuffix(".py"), source)) is not None}
    if module not in modules:
        return [f"{module}.py could not be parsed"]
    top = modules[module]
    found = [f"{module}.py line {node.lineno} patches {ast.unparse(target)} when it is imported"
             for node in top.tree.body if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if not isinstance(target, ast.Name)]
    if not isinstance(top.defs.get(function), ast.FunctionDef) or _rebound(top.tree, function):
        return [*found, f"{function} is not defined once, by a plain def, in {module}.py"]
    calls: dict[tuple[str, str], set[tuple[str, str]]] = {}
    stack = [(module, function)]
    while stack:
        where, name = stack.pop()
        if (where, name) in calls:
            continue
        definition = modules[where].defs[name]
        calls[(where, name)] = set()
        if getattr(definition, "decorator_list", None):
            found.append(f"{name} in {where}.py is decorated (line {definition.lineno})")
        for node in ast.walk(definition):
            line = f"{where}.py line {getattr(node, 'lineno', '?')}"
            if type(node) in LOOPS:
                found.append(f"{LOOPS[type(node)]} in {name} ({line})")
            elif isinstance(node, ast.Call):
                if _called_name(node.func) in HIDDEN:
                    found.append(f"{name} calls {_called_name(node.func)}() ({line})")
                target = _resolve(modules, where, node.func)
                if target is not None:
                    calls[(where, name)].add(target)
                    stack.append(target)
    cycle = _cycle(calls, (module, function))
    if cycle:
        found.append(f"{' -> '.join(name for _, name in cycle)} calls itself again: a loop by recursion")
    return found


def _parse(name: str, source: bytes) -> Module | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            defs.update({target.id: node for target in node.targets if isinstance(target, ast.Name)})
    imports: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):  # imports inside functions too: a helper can be imported where it is called
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "exercises"):
            base = (node.module or "") if node.level else (node.module or "").removeprefix("exercises").lstrip(".")
            for alias in node.names:
                imports[alias.asname or alias.name] = (base, alias.name) if base else (alias.name, None)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("exercises.") and alias.asname:
                    imports[alias.asname] = (alias.name.split(".", 1)[1], None)
    return Module(name, tree, defs, imports)


def _rebound(tree: ast.Module, name: str) -> bool:
    """`name` bound at the top level by anything but its one def: a second def, an assignment, an import."""
    count = 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            count += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            count += any((alias.asname or alias.name).split(".")[0] == name for alias in node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            count += any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
                         for n in ast.walk(node))
    return count != 1


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in (
            "functools", "itertools", "builtins", "importlib"):
        return func.attr
    return None


def _resolve(modules: dict[str, Module], where: str, func: ast.expr) -> tuple[str, str] | None:
    """The submission code a call runs: a def (or class, or assigned lambda) of a submitted file."""
    module = modules[where]
    if isinstance(func, ast.Name):
        if func.id in module.defs:
            return where, func.id
        source, attribute = module.imports.get(func.id, (None, None))
        if source in modules and attribute in modules[source].defs:
            return source, attribute
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        source, attribute = module.imports.get(func.value.id, (None, None))
        if source in modules and attribute is None and func.attr in modules[source].defs:
            return source, func.attr
    return None


def _cycle(calls: dict[tuple[str, str], set[tuple[str, str]]], start: tuple[str, str]) -> list[tuple[str, str]]:
    """A path from `start` that comes back to a function already on it, or [] (depth first)."""
    path: list[tuple[str, str]] = []
    done: set[tuple[str, str]] = set()

    def visit(node: tuple[str, str]) -> list[tuple[str, str]]:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return []
        path.append(node)
        for callee in sorted(calls.get(node, ())):
            if found := visit(callee):
                return found
        path.pop()
        done.add(node)
        return []

    return visit(start)
