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
import builtins
import functools
import types
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from grader.judge.sources import imported_closure, parse
from grader.text import clean

# Objects a tensor expression can hold (`x.shape`, `x.dtype`, `torch.finfo(x.dtype)`): their public attributes may
# be read, but for those that leave torch (`.numpy()`, `.tolist()`) or run a function per element (`.apply_`, hooks).
VALUE_TYPES = (torch.Tensor, torch.Size, torch.dtype, torch.device, torch.finfo, torch.iinfo)
LEAVES_TORCH = frozenset({"numpy", "tolist", "apply_", "map_", "map2_", "apply", "untyped_storage", "storage",
                          "data_ptr"})
TORCH_MODULES = frozenset({"torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.linalg",
                           "torch.special", "torch.fft"})
TORCH_ALSO = frozenset({"torch.cuda.is_available", "torch.backends.mps.is_available"})
# torch functions that call a Python function, run code from a file or a string, or hand the data to another library
TORCH_REFUSED = frozenset({"torch.vmap", "torch.compile", "torch.cond", "torch.while_loop", "torch.load",
                           "torch.save", "torch.from_numpy", "torch.from_dlpack", "torch.to_dlpack", "torch.frombuffer",
                           "torch.import_ir_module", "torch.import_ir_module_from_buffer", "torch.classproperty",
                           "torch.set_default_tensor_type", "torch.nn.functional.boolean_dispatch",
                           "torch.nn.functional.handle_torch_function", "torch.nn.functional.Callable",
                           "torch.nn.init.Callable"})
MATH = frozenset({"math.pi", "math.e", "math.inf", "math.nan", "math.tau", "math.sqrt", "math.log", "math.log2",
                  "math.log10", "math.exp", "math.ceil", "math.floor", "math.isqrt", "math.pow", "math.fabs",
                  "math.isfinite", "math.isinf", "math.isnan", "math.gcd"})
# Builtins on dimensions and numbers; the iterating ones only over a parameter's .shape (or a literal).
BUILTINS = frozenset({"int", "float", "bool", "len", "abs", "round", "min", "max", "isinstance", "print", "range",
                      "slice", "super", "tuple", "list", "all", "any", "sum", "map", "ValueError", "TypeError",
                      "RuntimeError", "IndexError", "KeyError", "AssertionError", "NotImplementedError"})
ITERATING = frozenset({"tuple", "list", "all", "any", "sum", "min", "max", "map"})
# What the body of a loop over a shape may do: check and convert the dimensions, never touch a tensor, so that it
# does no work however many dimensions it is handed (a helper's parameter can be a tensor of T dims).
DIMENSION_CALLS = frozenset({"int", "float", "bool", "abs", "round", "min", "max", "print", "ValueError", "TypeError",
                             "RuntimeError", "IndexError", "KeyError", "AssertionError", "NotImplementedError"})
DIMENSION_NODES = (ast.Assert, ast.If, ast.Raise, ast.Expr, ast.Pass, ast.Constant, ast.Compare, ast.BoolOp,
                   ast.UnaryOp, ast.BinOp, ast.IfExp, ast.Tuple, ast.keyword, ast.expr_context, ast.operator,
                   ast.cmpop, ast.boolop, ast.unaryop)
DECORATORS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.lru_cache",
                        "functools.cache", "staticmethod", "classmethod", "property"})
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
ASSIGNMENTS = (ast.Assign, ast.AnnAssign)
COMPREHENSIONS = {ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
                  ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression"}
PLAIN_EXPRESSIONS = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript,
                     ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.JoinedStr, ast.FormattedValue)
ANNOTATION_NODES = (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Tuple, ast.List, ast.BinOp, ast.BitOr,
                    ast.Load)

_TOP_OF_FILE = ("keep only imports, definitions and constants at the top of the file; try code out in a notebook or "
                "another file, not in an `if __name__ == \"__main__\":` block")
# What the reader saw ({code} is the submission's own text, shortened), and the hint that goes with it.
MESSAGES: dict[str, tuple[str, str]] = {
    "loop": ("{kind} over {code}, which runs Python code once per element",
             "build the (T, T) weights once and use one matrix product, weights @ x; a loop may only go over a "
             "parameter's .shape (its few dimensions)"),
    "shape": ("{kind} over {code}, the .shape of something that is not a parameter: its length can be anything",
              "loop only over a parameter's .shape (its few dimensions), or better, not at all: build the (T, T) "
              "weights once and use one matrix product, weights @ x"),
    "shape_work": ("{code} in a loop over {shape}, where only the dimensions may be checked or converted",
                   "loop over a .shape only to check its dimensions (assert d > 0, int(d)); do the work with tensor "
                   "operations, outside any loop"),
    "while": ("a while loop", "build the (T, T) weights once and use one matrix product, weights @ x"),
    "recursion": ("{code} runs itself again, a loop by recursion",
                  "compute the result in one pass of tensor operations; a function must not call itself"),
    "callback": ("{code} handed to {callee}(), which may call it once per element",
                 "pass tensors and numbers to functions, never a function: call your own function yourself, once, "
                 "on whole tensors"),
    "lambda": ("a lambda", "write a plain def and call it yourself, once, on whole tensors"),
    "function_value": ("{code} used as a value (stored, handed on or returned) instead of called",
                       "call your functions and classes by name, f(x), and hand them only tensors and numbers: a "
                       "function passed around can run once per element, or call itself"),
    "text": ("{kind}, which turns values into text outside a message",
             "keep f-strings and % formatting to the messages of raise, assert and print"),
    "annotation": ("the annotation {code}, which runs code when the def runs",
                   "annotate with a plain type (torch.Tensor, int) or leave the annotation out"),
    "dunder": ("{code}, a double-underscore name",
               "write plain functions and names: Python's own __names__ (operators, __name__) run code out of the "
               "reader's sight; try code out in a notebook or another file, not in an `if __name__ == \"__main__\":` "
               "block"),
    "top_if": ("`if {code}:` at the top of the file, which runs at import", _TOP_OF_FILE),
    "top_code": ("a {kind} statement that runs at import", _TOP_OF_FILE),
    "dead": ("the guard `if {code}:`, whose branch never runs or always runs", "remove the dead branch"),
    "statement": ("a {kind} statement",
                  "keep to assignments, if, return and calls of torch functions and tensor methods"),
    "expression": ("{kind}", "keep to assignments, if, return and calls of torch functions and tensor methods"),
    "library": ("{code}, from {library}, which the grader does not read",
                "use torch (torch, torch.nn.functional, tensor methods) and math only: other libraries work out of "
                "the grader's sight"),
    "torch": ("{code}, which calls Python code, reads files or leaves torch",
              "use torch's tensor operations (torch.tril, torch.ones, masked_fill, softmax, @)"),
    "builtin": ("the builtin {code}", "only int, float, bool, len, abs, round, min, max, isinstance, print, range "
                                      "and, over a parameter's .shape, tuple, list, sum, all, any and map(int, ...) "
                                      "are read"),
    "iterating": ("{code}() over {argument}, which is not a parameter's .shape",
                  "use tensor operations (x.sum(dim=...), torch.stack) instead of Python's iteration"),
    "leaves_torch": ("the method .{code}(), which leaves torch or runs a function per element",
                     "stay with tensor operations: .numpy(), .tolist() and hooks move the work out of torch"),
    "attribute": ("the attribute .{code}, which the reader does not know of a tensor",
                  "call torch functions and tensor methods; attributes of other objects are not read"),
    "twice": ("{code} bound a second time (first on line {first})",
              "define each name once at the top of the file: the grader reads the one definition a name has"),
    "decorator": ("the decorator @{code}, which the reader does not know",
                  "use only @torch.no_grad(), @functools.lru_cache, @staticmethod, @classmethod or @property"),
    "target": ("an assignment to {code}", "assign to names and to items (out[i] = ...), not to attributes"),
    "base": ("a class built on {code}, which the reader does not know",
             "derive only from torch classes (nn.Module) or from your own plain classes"),
    "class_keyword": ("the class keyword {code}=", "write a plain class, without a metaclass or class keywords"),
    "star": ("an import of *", "import the names you use, by name"),
    "unreadable": ("{code}, from {module}.py, which the grader cannot read",
                   "define it in a file the grader reads (one of your exercise files), or use torch"),
    "not_defined": ("{code} is not defined by a plain def", "define it with `def`, at the top level of the file"),
    "unparsable": ("the file could not be parsed", "fix the syntax error first"),
    "nested": ("code nested too deeply for the reader", "split long expressions into several lines"),
}


@dataclass(frozen=True)
class Refusal:
    """A line of the submission the reader could not accept: what it saw there, and a hint for the student."""

    file: str
    line: int
    what: str
    hint: str

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.what}"


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
    definitions = [d for d in modules[module].scope.names.get(function, []) if isinstance(d, ast.FunctionDef)]
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


def _refusal(file: str, line: int, message: str, **values: str) -> Refusal:
    what, hint = MESSAGES[message]
    shown = {key: clean(value, newlines=False) for key, value in values.items()}
    return Refusal(file, line, what.format(**shown), hint)


def _code(node: ast.AST, limit: int = 48) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


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


# --- what torch, math and the builtins may be asked -----------------------------------------------------------


def _leaves_torch(name: str) -> bool:
    return name in LEAVES_TORCH or "hook" in name


ATTRIBUTES = frozenset(name for kind in VALUE_TYPES for name in dir(kind)
                       if not name.startswith("_") and not _leaves_torch(name))
# Attributes that are methods on every value type that has them: `x.sum` is a function, `finfo.min` a number.
METHODS = frozenset(name for name in ATTRIBUTES
                    if all(callable(getattr(kind, name)) for kind in VALUE_TYPES if hasattr(kind, name)))


@functools.cache
def _torch_object(path: str) -> tuple[bool, object]:
    """Whether the reader accepts torch's `path` ("torch.nn.functional.softmax"), and the object it names."""
    if path in TORCH_ALSO:
        return True, None
    parts = path.split(".")
    value: object = torch
    for depth, part in enumerate(parts[1:], start=2):
        if part.startswith("_") or _leaves_torch(part) or ".".join(parts[:depth]) in TORCH_REFUSED:
            return False, None
        if isinstance(value, types.ModuleType) and value.__name__ not in TORCH_MODULES:
            return False, None
        if not isinstance(value, (types.ModuleType, type)) and part not in ATTRIBUTES:
            return False, None
        try:
            value = getattr(value, part)
        except AttributeError:
            return False, None
    return not isinstance(value, types.ModuleType) or value.__name__ in TORCH_MODULES, value


def _accepted_library(path: str) -> bool:
    if path == "torch" or path.startswith("torch."):
        return _torch_object(path)[0]
    return path == "math" or path in MATH


def _library_function(path: str) -> bool:
    """Whether a library object is a function (handed to another function, a callback), not a type or a value."""
    if path.startswith("math."):
        return path not in ("math.pi", "math.e", "math.inf", "math.nan", "math.tau")
    accepted, value = _torch_object(path)
    return accepted and callable(value) and not isinstance(value, type)


# --- the reader ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    """Something the reader reads once: a module's import-time code, a function's body, a class (its methods, its
    bases) or a module-level value; `scope` is where it sits."""

    node: ast.AST
    scope: _Scope
    name: str
    receiver: str | None = None


class _Reader:
    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules
        self.refusals: list[Refusal] = []
        self.units: dict[int, _Unit] = {}
        self.edges: dict[int, set[int]] = {}
        self.todo: list[_Unit] = []
        self.unit: _Unit | None = None
        self.class_scopes: dict[int, _Scope] = {}
        self.in_message = False  # reading the message of a raise, an assert or a print: text may be built there
        self.methods: dict[str, list[_Unit]] = {}  # every method of the submission's classes, by name
        for module in modules.values():
            self.index_methods(module.tree.body, module.scope)

    # --- bookkeeping

    def index_methods(self, body: list[ast.stmt], scope: _Scope) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                inner = self.class_scope(node, scope)
                for method in node.body:
                    if isinstance(method, ast.FunctionDef):
                        self.methods.setdefault(method.name, []).append(_method(method, node, inner))
                self.index_methods(node.body, inner)

    def refuse(self, message: str, node: ast.AST | int, scope: _Scope, **values: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.refusals.append(_refusal(scope.module.file, line, message, **values))

    def queue(self, unit: _Unit) -> None:
        if id(unit.node) not in self.units:
            self.units[id(unit.node)] = unit
            self.edges[id(unit.node)] = set()
            self.todo.append(unit)

    def reach(self, unit: _Unit) -> None:
        """The unit being read names `unit`: read it too, and remember the edge (recursion is a cycle of them)."""
        self.queue(unit)
        if self.unit is not None and self.unit.name != "import":
            self.edges[id(self.unit.node)].add(id(unit.node))

    def run(self) -> None:
        while self.todo:
            self.unit = self.todo.pop(0)
            node, scope = self.unit.node, self.unit.scope
            if isinstance(node, ast.Module):
                self.import_time(node.body, scope)
            elif isinstance(node, FUNCTIONS):
                inner = _Scope(node, scope.module, scope, _bindings(node.body, parameters=node.args),
                               receiver=self.unit.receiver)
                self.statements(node.body, inner)
            elif isinstance(node, ast.ClassDef):
                self.whole_class(node, scope)
            elif isinstance(node, ASSIGNMENTS) and node.value is not None:
                self.expression(node.value, scope)
        self.recursion()

    def recursion(self) -> None:
        done: set[int] = set()
        path: list[int] = []

        def visit(key: int) -> list[int]:
            if key in path:
                return [*path[path.index(key):], key]
            if key in done:
                return []
            path.append(key)
            for callee in sorted(self.edges.get(key, ())):
                if cycle := visit(callee):
                    return cycle
            path.pop()
            done.add(key)
            return []

        for key in list(self.units):
            if cycle := visit(key):
                first = self.units[cycle[0]]
                self.refuse("recursion", first.node, first.scope,
                            code=" -> ".join(self.units[k].name for k in cycle))
                return

    # --- the top of a file, and class bodies

    def import_time(self, body: list[ast.stmt], scope: _Scope) -> None:
        self.twice(scope)
        for node in body:
            if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node, scope)
            elif isinstance(node, ast.FunctionDef):
                method = isinstance(scope.node, ast.ClassDef)
                if _dunder(node.name) and not (method and node.name == "__init__"):
                    self.refuse("dunder", node, scope, code=f"def {node.name}")
                self.header(node, scope)
            elif isinstance(node, ast.ClassDef):
                self.class_header(node, scope)
            elif isinstance(node, ASSIGNMENTS):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self.target(target, scope, names_only=True)
                if isinstance(node, ast.AnnAssign):
                    self.annotation(node.annotation, scope)
                if isinstance(scope.node, ast.Module):
                    name = _code(targets[0], 24)
                    self.reach(_Unit(node, scope, name=name))
                elif node.value is not None:
                    self.expression(node.value, scope)
            elif isinstance(node, ast.Expr):
                self.expression(node.value, scope)
            elif isinstance(node, ast.If):
                self.refuse("top_if", node, scope, code=_code(node.test))
            else:
                self.refuse("top_code", node, scope, kind=_kind(node))

    def twice(self, scope: _Scope) -> None:
        for name, bindings in scope.names.items():
            imports = {(b.library, b.module, b.attribute) for b in bindings if isinstance(b, _Imported)}
            if len(bindings) > 1 and not (len(imports) == 1 and all(isinstance(b, _Imported) for b in bindings)):
                lines = sorted(getattr(b, "lineno", getattr(b, "line", 1)) for b in bindings)
                self.refuse("twice", lines[1], scope, code=name, first=str(lines[0]))

    def imports(self, node: ast.Import | ast.ImportFrom, scope: _Scope) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.refuse("star", node, scope)
            elif _dunder((alias.asname or alias.name).split(".")[0]):
                self.refuse("dunder", node, scope, code=alias.asname or alias.name)

    def header(self, node: ast.FunctionDef, scope: _Scope) -> None:
        """What runs when a def runs: its decorators, defaults and annotations."""
        self.decorators(node, scope)
        for default in [*node.args.defaults, *filter(None, node.args.kw_defaults)]:
            self.expression(default, scope)
        arguments = [*node.args.posonlyargs, *node.args.args, node.args.vararg, *node.args.kwonlyargs,
                     node.args.kwarg]
        for annotation in [*(a.annotation for a in arguments if a is not None), node.returns]:
            if annotation is not None:
                self.annotation(annotation, scope)

    def class_header(self, node: ast.ClassDef, scope: _Scope) -> None:
        self.decorators(node, scope)
        for base in node.bases:
            self.base(base, scope)
        for keyword in node.keywords:
            self.refuse("class_keyword", keyword.value, scope, code=str(keyword.arg))
        self.import_time(node.body, self.class_scope(node, scope))

    def class_scope(self, node: ast.ClassDef, parent: _Scope) -> _Scope:
        if id(node) not in self.class_scopes:
            self.class_scopes[id(node)] = _Scope(node, parent.module, parent, _bindings(node.body))
        return self.class_scopes[id(node)]

    def base(self, node: ast.expr, scope: _Scope) -> None:
        chain = _chain(node)
        if chain is not None:
            root, attributes = chain
            found, bindings = scope.resolve(root.id)
            if found is None and root.id == "object" and not attributes:
                return
            for binding in bindings:
                if isinstance(binding, _Imported) and binding.library is not None:
                    path = ".".join([binding.library, *attributes])
                    if _accepted_library(path) and isinstance(_torch_object(path)[1], type):
                        return
                elif isinstance(binding, ast.ClassDef) and not attributes and found is not None:
                    self.reach(_Unit(binding, found, name=binding.name))
                    return
        self.refuse("base", node, scope, code=_code(node))

    def whole_class(self, node: ast.ClassDef, scope: _Scope) -> None:
        """A class the code names: every method may run (operators run them unseen), and what it derives from."""
        inner = self.class_scope(node, scope)
        for base in node.bases:
            self.base(base, scope)
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef):
                self.reach(_method(statement, node, inner))
            elif isinstance(statement, ast.ClassDef):
                self.reach(_Unit(statement, inner, name=statement.name))

    def decorators(self, node: ast.FunctionDef | ast.ClassDef, scope: _Scope) -> None:
        for decorator in node.decorator_list:
            called = decorator.func if isinstance(decorator, ast.Call) else decorator
            chain = _chain(called)
            path = None
            if chain is not None:
                root, attributes = chain
                found, bindings = scope.resolve(root.id)
                if found is None and not attributes:
                    path = root.id
                elif len(bindings) == 1 and isinstance(bindings[0], _Imported) and bindings[0].library:
                    path = ".".join([bindings[0].library, *attributes])
            if path not in DECORATORS:
                self.refuse("decorator", decorator, scope, code=_code(called))
            elif isinstance(decorator, ast.Call):
                self.arguments(decorator, scope, callee=path)

    def annotation(self, node: ast.expr, scope: _Scope) -> None:
        """An annotation runs when its def runs: only a type (names, attributes, subscripts, `|`, constants)."""
        for inner in ast.walk(node):
            plain = isinstance(inner, ANNOTATION_NODES) and not (isinstance(inner, ast.BinOp)
                                                                 and not isinstance(inner.op, ast.BitOr))
            named = inner.id if isinstance(inner, ast.Name) else inner.attr if isinstance(inner, ast.Attribute) else ""
            if not plain or _dunder(named):
                self.refuse("annotation", node, scope, code=_code(node))
                return

    # --- function bodies

    def statements(self, body: list[ast.stmt], scope: _Scope) -> None:
        for node in body:
            self.statement(node, scope)

    def statement(self, node: ast.stmt, scope: _Scope) -> None:
        if isinstance(node, ast.Pass):
            return
        if isinstance(node, ast.Expr):
            self.expression(node.value, scope)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self.target(target, scope)
            if isinstance(node, ast.AnnAssign):
                self.annotation(node.annotation, scope)
            if node.value is not None:
                self.expression(node.value, scope)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expression(node.value, scope)
        elif isinstance(node, ast.Assert):
            self.expression(node.test, scope)
            if node.msg is not None:
                self.message(node.msg, scope)
        elif isinstance(node, ast.Raise):
            for child in ast.iter_child_nodes(node):
                self.message(child, scope)
        elif isinstance(node, ast.If):
            if self.dead(node.test, scope):
                self.refuse("dead", node, scope, code=_code(node.test))
            self.expression(node.test, scope)
            self.statements(node.body, scope)
            self.statements(node.orelse, scope)
        elif isinstance(node, ast.With):
            for item in node.items:
                self.expression(item.context_expr, scope)
                if item.optional_vars is not None:
                    self.target(item.optional_vars, scope)
            self.statements(node.body, scope)
        elif isinstance(node, ast.For):
            if not self.over_shape(node.iter, scope):
                self.refuse(_loop(node.iter), node, scope, kind="a for loop", code=_code(node.iter))
            else:
                self.dimension_work([*node.body, *node.orelse], node.target, node.iter, scope)
            self.target(node.target, scope)
            self.expression(node.iter, scope)
            self.statements(node.body, scope)
            self.statements(node.orelse, scope)
        elif isinstance(node, ast.While):
            self.refuse("while", node, scope)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self.target(target, scope)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imports(node, scope)
        elif isinstance(node, ast.FunctionDef):
            self.header(node, scope)
            self.queue(_Unit(node, scope, name=node.name))
        else:
            self.refuse("statement", node, scope, kind=_kind(node))

    def target(self, node: ast.expr, scope: _Scope, *, names_only: bool = False) -> None:
        if isinstance(node, ast.Name):
            if _dunder(node.id):
                self.refuse("dunder", node, scope, code=node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.target(element, scope, names_only=names_only)
        elif isinstance(node, ast.Starred):
            self.target(node.value, scope, names_only=names_only)
        elif isinstance(node, ast.Subscript) and not names_only:
            self.expression(node.value, scope)
            self.expression(node.slice, scope)
        elif isinstance(node, ast.Attribute) and not names_only and isinstance(node.value, ast.Name) \
                and node.value.id == scope.receiver and scope.parameter(node.value.id) and not _dunder(node.attr):
            return  # self.weights = ...: the class is read whole
        else:
            self.refuse("target", node, scope, code=_code(node))

    def dead(self, test: ast.expr, scope: _Scope) -> bool:
        """`if False:`, `if 0:`, `if DEBUG:` with DEBUG a constant: a branch that never runs, or always does."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if isinstance(test, ast.Name):
            found, bindings = scope.resolve(test.id)
            return found is not None and isinstance(found.node, ast.Module) and all(
                isinstance(b, ASSIGNMENTS) and isinstance(b.value, ast.Constant) for b in bindings)
        return not any(isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) for n in ast.walk(test))

    def over_shape(self, node: ast.expr, scope: _Scope) -> bool:
        """`x.shape`, `x.size()`, or a slice of them, with `x` a parameter: a few dimensions, never the positions."""
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            node = node.value
        if isinstance(node, ast.Call) and not node.args and not node.keywords and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "size":
            node = node.func
        elif not (isinstance(node, ast.Attribute) and node.attr == "shape"):
            return False
        return isinstance(node.value, ast.Name) and scope.parameter(node.value.id)

    # --- expressions

    def expression(self, node: ast.expr, scope: _Scope) -> None:
        if isinstance(node, ast.Name):
            self.name(node, scope)
        elif isinstance(node, ast.Attribute):
            self.attribute(node, scope)
        elif isinstance(node, ast.Call):
            self.call(node, scope)
        elif isinstance(node, tuple(COMPREHENSIONS)):
            self.comprehension(node, scope)
        elif not self.in_message and (isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)
                and isinstance(node.left.value, str))):
            self.refuse("text", node, scope, kind="an f-string" if isinstance(node, ast.JoinedStr) else "% formatting")
        elif isinstance(node, PLAIN_EXPRESSIONS):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expression(child, scope)
        elif isinstance(node, ast.Lambda):
            self.refuse("lambda", node, scope)
        else:
            self.refuse("expression", node, scope, kind=_kind(node))

    def message(self, node: ast.expr, scope: _Scope) -> None:
        """The message of a raise, an assert or a print: text may be built there, it goes nowhere the code reads."""
        outside, self.in_message = self.in_message, True
        try:
            self.expression(node, scope)
        finally:
            self.in_message = outside

    def name(self, node: ast.Name, scope: _Scope, *, called: bool = False) -> None:
        if _dunder(node.id):
            self.refuse("dunder", node, scope, code=node.id)
            return
        found, bindings = scope.resolve(node.id)
        if found is None:
            if node.id not in BUILTINS:
                self.refuse("builtin", node, scope, code=node.id)
            return
        for binding in bindings:
            self.binding(binding, found, node, scope, called=called)

    def binding(self, binding: Binding, found: _Scope, node: ast.AST, scope: _Scope, *,
                attributes: tuple[str, ...] = (), called: bool = False) -> None:
        """Check or follow what a name is bound to; `attributes` are read from it (`F.softmax`, `helpers.build`),
        `called` when the expression is called there and then (a function may only be called, never passed on)."""
        if isinstance(binding, _Imported):
            if binding.library is not None:
                path = ".".join([binding.library, *attributes])
                if not _accepted_library(path):
                    library = binding.library.split(".")[0]
                    self.refuse("torch" if library == "torch" else "library", node, scope, code=_code(node),
                                library=library)
                return
            self.submission(binding, node, scope, attributes=attributes, called=called)
            return
        if isinstance(binding, DEFINITIONS):
            method = isinstance(binding, ast.ClassDef) and len(attributes) == 1 and any(
                isinstance(d, FUNCTIONS) for d in self.class_scope(binding, found).names.get(attributes[0], []))
            if not called and (not attributes or method):
                self.refuse("function_value", node, scope, code=_code(node))
            self.reach(_Unit(binding, found, name=binding.name))
        elif isinstance(binding, ASSIGNMENTS) and isinstance(found.node, ast.Module):
            targets = binding.targets if isinstance(binding, ast.Assign) else [binding.target]
            self.reach(_Unit(binding, found, name=_code(targets[0], 24)))
        if attributes and not isinstance(binding, ast.ClassDef):
            self.value_attributes(attributes, node, scope, called=called)

    def submission(self, imported: _Imported, node: ast.AST, scope: _Scope, *, attributes: tuple[str, ...],
                   called: bool) -> None:
        """A name imported from a submission file: follow it into that file's top level."""
        name, rest = imported.attribute, attributes
        if name is None and rest:
            name, rest = rest[0], rest[1:]
        module = self.modules.get(imported.module or "")
        if module is None or name is None or name not in module.scope.names:
            self.refuse("unreadable", node, scope, code=_code(node), module=imported.module or "exercises")
            return
        for binding in module.scope.names[name]:
            self.binding(binding, module.scope, node, scope, attributes=rest, called=called)

    def attribute(self, node: ast.Attribute, scope: _Scope, *, called: bool = False) -> None:
        if _super(node.value) and scope.resolve("super")[0] is None:
            for argument in node.value.args:  # super(EncoderDecoder, self), as older code writes it: its own class
                own = isinstance(argument, ast.Name) and any(
                    isinstance(b, ast.ClassDef) for b in scope.resolve(argument.id)[1])
                if not own:
                    self.expression(argument, scope)
            if _dunder(node.attr) and node.attr != "__init__":
                self.refuse("dunder", node, scope, code=_code(node))
            elif not called:
                self.refuse("function_value", node, scope, code=_code(node))
            for unit in self.inherited(node.attr):
                self.reach(unit)
            return
        chain = _chain(node)
        if chain is None:
            self.expression(node.value, scope)
            self.value_attributes([node.attr], node, scope, called=called)
            return
        root, attributes = chain
        if any(_dunder(a) for a in [root.id, *attributes]):
            self.refuse("dunder", node, scope, code=_code(node))
            return
        found, bindings = scope.resolve(root.id)
        if found is None:
            self.name(root, scope)
            self.value_attributes(attributes, node, scope, called=called)
        elif root.id == scope.receiver and scope.parameter(root.id):
            # self.anything: the class is read whole; self.method() is followed to every method of that name
            if attributes[0] in self.methods:
                self.value_attributes(attributes, node, scope, called=called)
            elif _leaves_torch(attributes[0]):  # self.apply(f), self.register_forward_hook(f)
                self.refuse("leaves_torch", node, scope, code=attributes[0])
            else:
                self.value_attributes(attributes[1:], node, scope, called=called)
        else:
            for binding in bindings:
                self.binding(binding, found, node, scope, attributes=tuple(attributes), called=called)

    def inherited(self, name: str) -> list[_Unit]:
        """What `super().name` in the method being read may run: the methods called `name` of the submission
        classes its class derives from, directly or not (every method of that name outside a method)."""
        unit = self.unit
        if unit is None or not isinstance(unit.scope.node, ast.ClassDef) or unit.scope.parent is None:
            return self.methods.get(name, [])
        found: list[_Unit] = []
        todo, seen = [(unit.scope.node, unit.scope.parent)], set()
        while todo:
            owner, scope = todo.pop()
            for base in owner.bases:
                for parent, where in self.submission_classes(base, scope):
                    if id(parent) not in seen:
                        seen.add(id(parent))
                        inner = self.class_scope(parent, where)
                        found += [_method(m, parent, inner) for m in inner.names.get(name, [])
                                  if isinstance(m, ast.FunctionDef)]
                        todo.append((parent, where))
        return found

    def submission_classes(self, node: ast.expr, scope: _Scope) -> list[tuple[ast.ClassDef, _Scope]]:
        """The submission classes a base-class expression (`Base`, `helpers.Base`) names, with their scopes."""
        chain = _chain(node)
        if chain is None:
            return []
        root, attributes = chain
        found, bindings = scope.resolve(root.id)
        classes = []
        for binding in bindings:
            if isinstance(binding, ast.ClassDef) and not attributes and found is not None:
                classes.append((binding, found))
            elif isinstance(binding, _Imported) and binding.library is None:
                module = self.modules.get(binding.module or "")
                name = binding.attribute or (attributes[0] if len(attributes) == 1 else None)
                if module is not None and (binding.attribute is None) == (len(attributes) == 1):
                    classes += [(d, module.scope) for d in module.scope.names.get(name or "", [])
                                if isinstance(d, ast.ClassDef)]
        return classes

    def value_attributes(self, attributes: list[str] | tuple[str, ...], node: ast.AST, scope: _Scope, *,
                         called: bool = False) -> None:
        """Attributes read from a value the reader cannot type: a tensor's, or a method of the submission's."""
        for number, attribute in enumerate(attributes, start=1):
            last = number == len(attributes)
            if _dunder(attribute):
                self.refuse("dunder", node, scope, code=_code(node))
            elif _leaves_torch(attribute):
                self.refuse("leaves_torch", node, scope, code=attribute)
            elif attribute in self.methods and last and called:
                for unit in self.methods[attribute]:  # obj.step(): every method of that name may be the one called
                    self.reach(unit)
                continue
            elif attribute in self.methods and last:
                self.refuse("function_value", node, scope, code=_code(node))  # f = obj.step: a bound method
            elif attribute not in ATTRIBUTES:
                self.refuse("attribute", node, scope, code=attribute)
            else:
                continue
            return

    def call(self, node: ast.Call, scope: _Scope) -> None:
        builtin = node.func.id if isinstance(node.func, ast.Name) and scope.resolve(node.func.id)[0] is None else None
        if isinstance(node.func, ast.Name):
            self.name(node.func, scope, called=True)
        elif isinstance(node.func, ast.Attribute):
            self.attribute(node.func, scope, called=True)
        else:
            self.expression(node.func, scope)
        if builtin == "print":
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                self.message(argument, scope)
            return
        if builtin == "map":
            if len(node.args) == 2 and not node.keywords and isinstance(node.args[0], ast.Name) \
                    and node.args[0].id in ("int", "float") and self.dimensions(node.args[1], scope):
                self.expression(node.args[1], scope)  # map(int, x.shape): a conversion of the dimensions
            else:
                self.refuse("callback", node, scope, code=_code(node.args[0]) if node.args else "a function",
                            callee="map")
            return
        if builtin in ITERATING and len(node.args) == 1 and not self.dimensions(node.args[0], scope):
            self.refuse("iterating", node, scope, code=builtin, argument=_code(node.args[0]))
        classes: tuple[ast.expr, ...] = ()
        if builtin == "isinstance" and len(node.args) == 2:  # isinstance(x, MyClass): a class, not called
            second = node.args[1]
            classes = tuple(e for e in (second.elts if isinstance(second, ast.Tuple) else [second])
                            if isinstance(e, (ast.Name, ast.Attribute)))
        for keyword in node.keywords:
            if builtin is not None and keyword.arg == "key":  # min(..., key=f) calls f per element
                self.refuse("callback", keyword.value, scope, code=_code(keyword.value), callee=builtin)
        self.arguments(node, scope, callee=_code(node.func, 32), classes=classes)

    def arguments(self, node: ast.Call, scope: _Scope, *, callee: str, classes: tuple[ast.expr, ...] = ()) -> None:
        for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
            if isinstance(argument, ast.Tuple) and any(e in classes for e in argument.elts):
                for element in argument.elts:
                    if element in classes:
                        self.class_reference(element, scope)
                    else:
                        self.expression(element, scope)
            elif argument in classes:
                self.class_reference(argument, scope)
            elif self.function(argument, scope):
                self.refuse("callback", argument, scope, code=_code(argument), callee=callee)
            else:
                self.expression(argument, scope)

    def class_reference(self, node: ast.Name | ast.Attribute, scope: _Scope) -> None:
        if isinstance(node, ast.Name):
            self.name(node, scope, called=True)
        else:
            self.attribute(node, scope, called=True)

    def function(self, node: ast.expr, scope: _Scope, depth: int = 0) -> bool:
        """Whether `node` names a function (or a class, or a bound method): handed to another, a callback."""
        if isinstance(node, ast.Lambda):
            return True
        chain = _chain(node)
        if chain is None or depth > 4:
            return False
        root, attributes = chain
        found, bindings = scope.resolve(root.id)
        if found is None:
            value = getattr(builtins, root.id, None)
            return not attributes and callable(value) and not isinstance(value, type)
        if root.id == scope.receiver and scope.parameter(root.id) and len(attributes) == 1:
            return any(isinstance(b, DEFINITIONS) for b in found.parent.names.get(attributes[0], [])) \
                if found.parent is not None and isinstance(found.parent.node, ast.ClassDef) else False
        for binding in bindings:
            if isinstance(binding, _Imported) and binding.library is not None:
                return _library_function(".".join([binding.library, *attributes]))
            if isinstance(binding, _Imported):
                module = self.modules.get(binding.module or "")
                name = binding.attribute or (attributes[0] if attributes else None)
                return module is not None and any(isinstance(b, DEFINITIONS)
                                                  for b in module.scope.names.get(name or "", []))
            if isinstance(binding, DEFINITIONS) or (  # or an alias of one, `_run = _Helper.run`
                    isinstance(binding, ast.Assign) and isinstance(found.node, ast.Module) and not attributes
                    and self.function(binding.value, found, depth + 1)):
                return True
        # a value's attribute: x.sum is a bound method, x.dtype is not
        return bool(attributes) and (attributes[-1] in METHODS or attributes[-1] in self.methods)

    def dimensions(self, node: ast.expr, scope: _Scope) -> bool:
        """What an iterating builtin may go over: a parameter's .shape, a comprehension (itself read), a literal."""
        return self.over_shape(node, scope) or isinstance(node, (*COMPREHENSIONS, ast.Tuple, ast.List, ast.Set))

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp,
                      scope: _Scope) -> None:
        inner = _comprehension_scope(node, scope)
        for number, generator in enumerate(node.generators):
            where = scope if number == 0 else inner  # the first iterable is evaluated outside the comprehension
            if not self.over_shape(generator.iter, where):
                self.refuse(_loop(generator.iter), node, scope, kind=COMPREHENSIONS[type(node)],
                            code=_code(generator.iter))
            self.expression(generator.iter, where)
            self.target(generator.target, inner, names_only=True)
            for condition in generator.ifs:
                self.expression(condition, inner)
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for element in elements:
            self.expression(element, inner)
        if all(self.over_shape(g.iter, scope if n == 0 else inner) for n, g in enumerate(node.generators)):
            targets = ast.Tuple(elts=[g.target for g in node.generators], ctx=ast.Store())
            work = [*elements, *(condition for g in node.generators for condition in g.ifs)]
            self.dimension_work(work, targets, node.generators[0].iter, inner)

    def dimension_work(self, body: list[ast.AST], target: ast.expr, iterable: ast.expr, scope: _Scope) -> None:
        """Refuse what the body of a loop over a shape does beyond checking its dimensions (the loop's names)."""
        names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.JoinedStr):
                continue  # a message's text: what it formats is read as usual
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DIMENSION_CALLS \
                    and scope.resolve(node.func.id)[0] is None:
                stack += [*node.args, *node.keywords]
                continue
            if not (isinstance(node, DIMENSION_NODES) or (isinstance(node, ast.Name) and node.id in names)):
                self.refuse("shape_work", node, scope, code=_code(node), shape=_code(iterable))
                return
            stack += ast.iter_child_nodes(node)


def _method(node: ast.FunctionDef, owner: ast.ClassDef, scope: _Scope) -> _Unit:
    """A method's body, to be read with its receiver (`self`, `cls`; none for a static method)."""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    arguments = [*node.args.posonlyargs, *node.args.args]
    receiver = arguments[0].arg if arguments and not static else None
    return _Unit(node, scope, name=f"{owner.name}.{node.name}", receiver=receiver)


def _loop(iterable: ast.expr) -> str:
    """The message for a loop the reader refuses: over a shape (of what is not a parameter), or over anything."""
    if isinstance(iterable, ast.Subscript):
        iterable = iterable.value
    shape = isinstance(iterable, ast.Attribute) and iterable.attr == "shape"
    return "shape" if shape or (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute)
                                and iterable.func.attr == "size") else "loop"


def _chain(node: ast.expr) -> tuple[ast.Name, list[str]] | None:
    """`a.b.c` as (the name a, ["b", "c"]); None unless the expression is a name with attributes."""
    attributes: list[str] = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node, attributes[::-1]) if isinstance(node, ast.Name) else None


def _super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
        and not node.keywords


def _kind(node: ast.AST) -> str:
    """How a message names a statement or expression: "try", "an assignment expression (:=)"."""
    named = {ast.NamedExpr: "an assignment expression (:=)", ast.Await: "an await", ast.Yield: "a yield",
             ast.YieldFrom: "a yield from", ast.ClassDef: "class (inside a function)",
             ast.AsyncFunctionDef: "async def", ast.AugAssign: "augmented assignment"}
    return named.get(type(node), type(node).__name__.lower())
