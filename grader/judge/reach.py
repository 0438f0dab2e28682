"""`reach` reads sources in the trusted process (never runs them) for what ties an exercise's failures to another's:
the contract names a graded test exercises, and those a submission's code uses of the other exercises.

Scoring says "blocked by masking" only where both hold: the exercise's code uses a name masking defines, and one of
masking's failing tests exercises that name. The curriculum's `needs` say what an exercise may build on, not what a
student's code does: a MultiHeadAttention through F.scaled_dot_product_attention never calls attention().
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path

import pytest

from grader.curriculum import BY_ID
from grader.judge.sources import parse

OWNER = {name: exercise.id for exercise in BY_ID.values() for name in exercise.names}  # contract name -> exercise


def tested_names(item: pytest.Item) -> list[str]:
    """The contract names the graded test `item` calls the submission's code by: `impl.<exercise>.<name>` and
    `getattr(impl.<exercise>, name)` in the test and in the module-level helpers and fixtures it names, directly or
    not, `impl` being the fixture or what a helper's parameter receives of it (`built(impl, ...)` makes `lib` in
    `def built(lib, ...)` the submission). A name given to getattr as a variable is read from the case's parameters,
    else from the test's own string constants (`built(impl, "DecoderLayer", p)`). A case whose parameters name some
    of these (`[FeedForward]`) tests those only."""
    params = list(getattr(getattr(item, "callspec", None), "params", {}).values())
    found: dict[str, None] = {}
    for exercise, wanted, constants in _calls(str(item.path), getattr(item, "originalname", None)
                                              or item.name.split("[")[0]):
        named = [value for value in params if value in BY_ID[exercise].names]  # this case's, first
        candidates = [wanted] if wanted is not None else named or constants
        found.update(dict.fromkeys(c for c in candidates if isinstance(c, str) and c in BY_ID[exercise].names))
    case = [name for name in found if name in params]
    return case or list(found)  # a case named after one of them tests that one, whatever else its code may reach


@functools.lru_cache(maxsize=1024)
def _calls(path: str, test: str) -> tuple[tuple[str, str | None, tuple[object, ...]], ...]:
    """What test function `test` of the file at `path` reaches of the submission, read once for all its cases: per
    `impl.<exercise>.<name>` or `getattr(impl.<exercise>, ...)`, the exercise, the name when the code spells it (None
    for a getattr of a variable), and the test's own constants, where such a variable's value may come from."""
    functions = _functions(path)
    reached = _reached(functions, test)
    aliases = _aliases(functions, reached)
    constants = tuple(node.value for node in _walk(functions[reached[0]]) if isinstance(node, ast.Constant)) \
        if reached else ()
    calls = []
    for name in reached:
        for node in _walk(functions[name]):
            if isinstance(node, ast.Attribute) and (exercise := _impl_module(node.value, aliases[name])):
                calls.append((exercise, node.attr, ()))
            elif _is_getattr(node) and (exercise := _impl_module(node.args[0], aliases[name])):
                wanted = node.args[1]
                if not isinstance(wanted, ast.Constant):
                    calls.append((exercise, None, constants))
                elif isinstance(wanted.value, str):
                    calls.append((exercise, wanted.value, ()))
    return tuple(calls)


def _reached(functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], test: str) -> list[str]:
    """`test` and the module-level functions it names, directly or not (a fixture by its parameter), in that order."""
    reached = [test] if test in functions else []
    for name in reached:
        node = functions[name]
        named = [n.id for n in _walk(node) if isinstance(n, ast.Name)]
        named += [n.arg for n in _walk(node) if isinstance(n, ast.arg)]
        reached += [n for n in dict.fromkeys(named) if n in functions and n not in reached]
    return reached


def _aliases(functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], reached: list[str]) -> dict[str, set[str]]:
    """For each function of `reached`, the names the submission goes by in it: `impl`, and the parameters a call of
    another of them passes it to."""
    aliases = {name: {"impl"} for name in reached}
    changed = True
    while changed:
        changed = False
        for name in reached:
            for call in (n for n in _walk(functions[name]) if isinstance(n, ast.Call)):
                callee = call.func.id if isinstance(call.func, ast.Name) else None
                if callee not in aliases:
                    continue
                parameters = [a.arg for a in (*functions[callee].args.posonlyargs, *functions[callee].args.args)]
                passed = [(parameters[i] if i < len(parameters) else None, a) for i, a in enumerate(call.args)]
                passed += [(k.arg, k.value) for k in call.keywords]
                for parameter, value in passed:
                    if parameter and isinstance(value, ast.Name) and value.id in aliases[name] \
                            and parameter not in aliases[callee]:
                        aliases[callee].add(parameter)
                        changed = True
    return aliases


@functools.lru_cache(maxsize=4096)
def _walk(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ast.AST, ...]:
    """Every node of a test file's function (kept alive by `_functions`' cache), walked once for all its readers."""
    return tuple(ast.walk(function))


@functools.lru_cache(maxsize=64)
def _functions(path: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level functions (tests, helpers, fixtures) of the test file at `path`, by name."""
    tree = ast.parse(Path(path).read_bytes())
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _impl_module(node: ast.AST, aliases: set[str]) -> str | None:
    """`impl.<exercise>` (`impl` any of `aliases`) as that exercise; None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
            and node.attr in BY_ID:
        return node.attr
    return None


def _is_getattr(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) >= 2


def used_names(files: Mapping[str, bytes]) -> dict[str, frozenset[str]]:
    """For each exercise file of a submission, the contract names of other exercises its code uses, directly or
    through the code of the exercises it uses (a Transformer's Decoder's MultiHeadAttention's causal_mask): a load of
    a name imported from another exercise's file, or of `module.name` where the module was imported, beyond the import
    itself (a stub imports what it may never use). A name the file binds in any other way too (a local variable named
    `attention`) is not counted: which one a load means would take Python's scope rules to say."""
    direct = {exercise: _direct(data) for file, data in files.items()
              if (exercise := file.removesuffix(".py")) in BY_ID and file.endswith(".py")}
    reached = {}
    for exercise, names in direct.items():
        found, todo = set(names), list(names)
        while todo:
            owner = OWNER[todo.pop()]
            for name in direct.get(owner, frozenset()) if owner != exercise else ():
                if name not in found:
                    found.add(name)
                    todo.append(name)
        reached[exercise] = frozenset(found)
    return reached


def _direct(source: bytes) -> frozenset[str]:
    """The contract names of other exercises the code of one file loads."""
    parsed = parse("", source)
    if parsed is None:
        return frozenset()
    rebound = _bound_otherwise(parsed.tree)
    imports = {local: target for local, target in parsed.submission_imports.items() if local not in rebound}
    found = set()
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in imports:
            module, attribute = imports[node.id]
            if attribute is not None and attribute in OWNER and OWNER[attribute] == module:
                found.add(attribute)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imports:
            module, attribute = imports[node.value.id]
            if attribute is None and OWNER.get(node.attr) == module:
                found.add(node.attr)
    return frozenset(found)


def _bound_otherwise(tree: ast.Module) -> set[str]:
    """The names `tree` binds anywhere other than by an import: assigned, deleted, defined (not as a method: `self.`
    reaches those), a parameter, a caught exception, a match capture, declared global or nonlocal."""
    methods = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for inner in node.body}
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in methods:
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return bound
