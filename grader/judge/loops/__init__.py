"""`loops` reads a submission's source, in the trusted process, for any way a function could loop in Python.

The vectorisation tests count the aten operations a call dispatches, but that count is taken in the
worker, where the submission can rewrite the counting code. This module is the part of the verdict
the submission cannot reach: it parses the submitted files (never runs them) and passes a function
only when everything that can run, when its module is imported and when the function is called, is
made of what the reader knows to hold no Python loop.

It is an allow-list, not a list of known tricks. The import-time code of the function's module and of
the submission modules it imports may hold imports, plain `def`s and `class`es, assignments to names
and calls. The function and everything it names, resolved by Python's scope rules (a local variable
named like its function is a variable, not recursion), across files (functions, classes with all their
methods, module-level values) may hold assignments, `return`, `assert`, `raise`, `if`, `with`, nested
`def`s, and expressions made of names, constants, arithmetic, comparisons, subscripts and calls of:
torch functions (`torch`, `torch.nn`, `torch.nn.functional`, `torch.linalg`, `torch.special`, `torch.fft`),
tensor methods, `math`, the submission's own functions and a few builtins on dimensions. A loop or a
comprehension passes only over the `.shape` of a parameter (its few dimensions). Anything else is
refused, with the line it is on: an annotation that runs code, a double-underscore name, an `if` at
import or a dead-code guard, recursion, a function used as a value (handed to another, a callback, or
stored: so every call of the submission's code is a call by name, and recursion a cycle of names), numpy
or another library, text built from values outside a message, a name bound twice at the top of a file.
The test that uses this runs the function in a fresh worker that has imported only its module, so other
files' import-time code does not run there.
"""

from __future__ import annotations

import ast

from grader.judge.loops.reader import _Reader
from grader.judge.loops.scopes import _Module, _named_lambda, _Unit
from grader.judge.loops.vocabulary import Refusal, _refusal
from grader.judge.sources import imported_closure, parse

__all__ = ["Refusal", "python_loops"]


def python_loops(files: dict[str, bytes], module: str, function: str) -> list[Refusal]:
    """What in `module.function`, in what it can run, or in its module's import-time code, the reader could not
    accept as free of Python loops; [] when it accepts all of it."""
    try:
        return _read(files, module, function)
    except RecursionError:  # expressions nested thousands deep: no student writes them
        return [_refusal(f"{module}.py", 1, "nested")]


def _read(files: dict[str, bytes], module: str, function: str) -> list[Refusal]:
    parsed = {}
    for name, source in files.items():
        if name.endswith(".py") and (found := parse(name.removesuffix(".py"), source)) is not None:
            parsed[found.name] = found
    if module not in parsed:
        return [_refusal(f"{module}.py", 1, "unparsable")]
    modules = {name: _Module(name, found.tree) for name, found in parsed.items()}
    reader = _Reader(modules)
    definitions = [d for d in modules[module].scope.names.get(function, [])
                   if isinstance(d, ast.FunctionDef) or _named_lambda(d)]
    if not definitions:
        return [_refusal(f"{module}.py", 1, "not_defined", code=function)]
    for name in imported_closure(parsed, module):
        reader.queue(_Unit(modules[name].tree, modules[name].scope, name="import"))
    for definition in definitions:  # one, or the import-time code is refused: it binds the name twice
        reader.queue(_Unit(definition, modules[module].scope, name=function))
    reader.run()
    order = {name: rank for rank, name in enumerate(imported_closure(parsed, module))}
    refusals = list(dict.fromkeys(reader.refusals))
    return sorted(refusals, key=lambda r: (order.get(r.file.removesuffix(".py"), len(order)), r.line))
