"""`loops` reads a submission's source, in the trusted process, for Python-level loops in one function.

The vectorisation tests count the aten operations a call dispatches, but that count is taken in the
worker, where the submission can rewrite the counting code. This module is the part of the verdict
the submission cannot reach: it parses the submitted files (never runs them) and passes a function
only when the source plainly shows no Python loop in anything the function can run.

It is conservative on purpose. It reads the function, every submission function, class (all of
its methods: operators run them unseen) or module-level value the function names, and the
import-time code of the files the function's module imports. It reports loops and comprehensions
(but for those over a tensor's `.shape`), recursion, calls that run a function per element (`map`,
`reduce`, `itertools`, `iter`, a callback handed to another function, `Tensor.apply_`), and
anything that could change what runs behind the reader's back: `exec`/`eval`, `globals()`,
`setattr`, dunder attributes, `global`, a name defined twice, a decorator it does not know, and
import-time code other than imports, definitions and plain assignments. The test that uses it runs
the function in a fresh worker that has imported only that module, so other files' import-time code
does not run there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from grader.judge.sources import ParsedModule, bound_names, import_time_statements, imported_closure, parse

LOOPS = {
    ast.For: "a for loop", ast.AsyncFor: "a for loop", ast.While: "a while loop",
    ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
}
# Callables that run code once per element, or code the reader cannot see.
PER_ELEMENT = {"map", "filter", "iter", "reduce", "accumulate", "starmap"}
# Builtins that iterate over their one argument (two or more arguments are compared, not iterated).
ITERATING = {"sum", "list", "tuple", "all", "any", "sorted", "set", "frozenset", "dict", "enumerate", "zip",
             "reversed", "min", "max"}
DYNAMIC = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr",
           "getattr", "breakpoint", "import_module"}
DYNAMIC_MODULES = {"builtins", "sys", "importlib", "ctypes", "gc", "inspect", "types", "functools", "itertools",
                   "operator", "threading", "multiprocessing", "concurrent", "asyncio"}
PER_ELEMENT_METHODS = {"apply_", "map_", "map2_", "vectorize", "frompyfunc", "apply_along_axis"}
KNOWN_DECORATORS = {"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.cache",
                    "functools.lru_cache", "staticmethod", "classmethod", "property"}
SAFE_DUNDERS = {"__init__", "__name__", "__doc__"}


def python_loops(files: dict[str, bytes], module: str, function: str) -> list[str]:
    """What in `module.function`, or what it can run, loops in Python or hides code; [] when nothing does."""
    modules: dict[str, ParsedModule] = {}
    for name, source in files.items():
        if name.endswith(".py") and (parsed := parse(name.removesuffix(".py"), source)) is not None:
            modules[parsed.name] = parsed
    if module not in modules:
        return [f"{module}.py could not be parsed"]
    found: list[str] = []
    definitions = modules[module].bindings.get(function, [])
    if len(definitions) != 1 or not isinstance(definitions[0], ast.FunctionDef):
        return [f"{function} is not defined once, by a plain def, in {module}.py"]
    reader = _Reader(modules, found)
    for name in imported_closure(modules, module):
        reader.import_time(modules[name])
    reader.follow(module, function)
    return list(dict.fromkeys(found))


class _Reader:
    def __init__(self, modules: dict[str, ParsedModule], found: list[str]) -> None:
        self.modules = modules
        self.found = found
        self.calls: dict[tuple[str, str], set[tuple[str, str]]] = {}

    def import_time(self, module: ParsedModule) -> None:
        """What runs when `module` is imported: only imports, definitions and plain assignments may.

        Submission code that import-time code names (a class instantiated into a module constant) is read too.
        """
        named: set[tuple[str, str]] = set()
        for node in import_time_statements(module.tree.body):
            where = f"{module.name}.py line {node.lineno}"
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and (
                    (self.origin(module, node.value.func) or "").split(".")[0] in ("torch", "print")):
                named |= self.read(module, [node.value], owner=None)  # torch.manual_seed(1337), print(...)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.decorators(module, node)
                named |= self.read(module, [*node.args.defaults, *filter(None, node.args.kw_defaults)], owner=None)
                continue
            if isinstance(node, ast.ClassDef):
                self.decorators(module, node)
                named |= self.read(module, [*node.bases, *node.keywords], owner=None)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not all(isinstance(n, ast.Name) for t in targets for n in bound_names(t)):
                    self.found.append(f"{where} assigns to {ast.unparse(targets[0])} when it is imported")
                named |= self.read(module, [node.value] if node.value is not None else [], owner=None)
                continue
            self.found.append(f"{where} runs code when it is imported ({type(node).__name__.lower()} statement)")
        for where, what in sorted(named):
            self.follow(where, what)

    def decorators(self, module: ParsedModule, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            called = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.origin(module, called) not in KNOWN_DECORATORS:
                self.found.append(f"{node.name} in {module.name}.py has a decorator the grader does not know "
                                  f"(line {decorator.lineno})")

    def follow(self, module: str, name: str) -> None:
        """Read `module.name` and everything it names in the submission, then look for recursion."""
        stack = [(module, name)]
        while stack:
            key = stack.pop()
            if key in self.calls:
                continue
            self.calls[key] = set()
            where, what = key
            for definition in self.modules[where].bindings[what]:
                if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.decorators(self.modules[where], definition)
                for target in self.read(self.modules[where], [definition], owner=what):
                    self.calls[key].add(target)
                    stack.append(target)
        cycle = _cycle(self.calls, (module, name))
        if cycle:
            self.found.append(f"{' -> '.join(what for _, what in cycle)} runs itself again: a loop by recursion")

    def read(self, module: ParsedModule, nodes: list[ast.AST], *, owner: str | None) -> set[tuple[str, str]]:
        """Report what loops or hides code in `nodes`; return the submission definitions they name."""
        named: set[tuple[str, str]] = set()
        for root in nodes:
            for node in _walk(root):
                line = f"{module.name}.py line {getattr(node, 'lineno', '?')}"
                inside = f" in {owner}" if owner else ""
                if type(node) in LOOPS and not _over_shape(node):
                    self.found.append(f"{LOOPS[type(node)]}{inside} ({line})")
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    self.found.append(f"a {type(node).__name__.lower()} statement{inside} ({line})")
                elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr not in SAFE_DUNDERS:
                    self.found.append(f"{owner or 'import-time code'} reaches {node.attr} ({line})")
                elif isinstance(node, ast.Call):
                    self.call(module, node, line, inside)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    origin = self.origin(module, node)
                    imported = node.id in module.origins
                    if origin is not None and (origin in DYNAMIC if not imported else
                                               origin.split(".")[0] in DYNAMIC_MODULES):
                        self.found.append(f"{owner or 'import-time code'} uses {origin} ({line})")
                    target = self.resolve(module, node)
                    if target is not None:
                        named.add(target)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    target = self.resolve(module, node)
                    if target is not None:
                        named.add(target)
        return named

    def call(self, module: ParsedModule, node: ast.Call, line: str, inside: str) -> None:
        origin = self.origin(module, node.func) or ""
        last = origin.rsplit(".", 1)[-1]
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if origin in ("map", "builtins.map") and _plain_map(node):
            return
        if origin in PER_ELEMENT or (last in PER_ELEMENT and origin.split(".")[0] in DYNAMIC_MODULES):
            self.found.append(f"a call to {origin}(){inside}, which runs code per element ({line})")
        elif method in PER_ELEMENT_METHODS:
            self.found.append(f"a call to .{method}(){inside}, which runs a function per element ({line})")
        elif origin in ITERATING and len(node.args) == 1 and not _not_iterated(node.args[0]):
            self.found.append(f"{origin}(){inside} iterates over {ast.unparse(node.args[0])[:40]} ({line})")
        for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
            if isinstance(argument, ast.Lambda) or (origin and self.callable_definition(module, argument)):
                self.found.append(f"a function handed to {origin or ast.unparse(node.func)}(){inside}, which may "
                                  f"call it per element ({line})")

    def callable_definition(self, module: ParsedModule, node: ast.expr) -> bool:
        """Whether `node` names a submission function or class (or an alias of one)."""
        target = self.resolve(module, node)
        if target is None:
            return False
        where, what = target
        return any(isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(d, ast.Assign) and isinstance(d.value, (ast.Lambda, ast.Name, ast.Attribute)))
            for d in self.modules[where].bindings[what])

    def origin(self, module: ParsedModule, node: ast.expr) -> str | None:
        """The dotted name an expression stands for when it is a name or attribute chain from an import
        or a builtin ("torch.no_grad", "itertools.accumulate", "map"); None for submission definitions."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        if node.id in module.origins:
            base = module.origins[node.id]
        elif node.id in module.bindings or node.id in module.submission_imports:
            return None
        else:
            base = node.id  # a builtin, or a name the file never defines
        return ".".join([base, *reversed(parts)])

    def resolve(self, module: ParsedModule, node: ast.expr) -> tuple[str, str] | None:
        """The submission definition a name (or `submodule.name`) refers to, if any."""
        if isinstance(node, ast.Name):
            if node.id in module.bindings:
                return module.name, node.id
            source, attribute = module.submission_imports.get(node.id, (None, None))
            if source in self.modules and attribute in self.modules[source].bindings:
                return source, attribute
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            source, attribute = module.submission_imports.get(node.value.id, (None, None))
            if source in self.modules and attribute is None and node.attr in self.modules[source].bindings:
                return source, node.attr
        return None


def _shape(node: ast.expr) -> bool:
    """`x.shape`, `x.size()` or `x.shape[a:b]`: a handful of dimensions, not the positions."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
        and not node.args


def _over_shape(node: ast.AST) -> bool:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _shape(node.iter) and not any(type(inner) in LOOPS for inner in ast.walk(node) if inner is not node)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        return all(_shape(generator.iter) for generator in node.generators)
    return False


def _walk(root: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, but not into decorators: `decorators` judges those."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        for field, value in ast.iter_fields(node):
            if field == "decorator_list":
                continue
            children = value if isinstance(value, list) else [value]
            stack.extend(child for child in children if isinstance(child, ast.AST))


def _not_iterated(node: ast.expr) -> bool:
    """An argument whose iteration does no per-position work: dimensions, a range, a literal, a constant."""
    if _shape(node) or _over_shape(node) or isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"


def _plain_map(node: ast.Call) -> bool:
    """`map(int, x.shape)`: a conversion of the dimensions."""
    return (len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in ("int", "float")
            and _shape(node.args[1]))


def _cycle(calls: dict[tuple[str, str], set[tuple[str, str]]], start: tuple[str, str]) -> list[tuple[str, str]]:
    """A path from `start` that comes back to a definition already on it, or [] (depth first)."""
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
