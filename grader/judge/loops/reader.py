"""`reader` holds the loop reader: its bookkeeping, and the import-time code of files and class bodies."""

from __future__ import annotations

import ast

import torch

from grader.judge.loops.scopes import _bindings, _chain, _Imported, _method, _Module, _named_lambda, _Scope, _Unit
from grader.judge.loops.statements import _FunctionBodies
from grader.judge.loops.vocabulary import (
    ANNOTATION_NODES,
    ASSIGNMENTS,
    DECORATORS,
    DIMENSIONS,
    FUNCTIONS,
    MODULE_HOOKS,
    MODULE_OWN,
    REGISTERING,
    Refusal,
    _accepted_library,
    _code,
    _dunder,
    _kind,
    _refusal,
    _torch_object,
)


class _Reader(_FunctionBodies):
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
        # the units that may make torch call a hook of a submission's module (forward, extra_repr) unseen
        self.implicit: dict[str, set[int]] = {hook: set() for hook in MODULE_HOOKS}
        # what each attribute of a receiver is assigned, in any method of any class (`self.soft = nn.Softmax(-1)`)
        self.held: dict[str, list[tuple[ast.expr, _Scope]]] = {}
        self.registers = False  # whether any code registers a module by other means (add_module, _modules)
        for module in modules.values():
            self.index_methods(module.tree.body, module.scope)

    # --- bookkeeping

    def index_methods(self, body: list[ast.stmt], scope: _Scope) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                inner = self.class_scope(node, scope)
                for method in node.body:
                    if isinstance(method, ast.FunctionDef):
                        unit = _method(method, node, inner)
                        self.methods.setdefault(method.name, []).append(unit)
                        self.index_held(method, unit.receiver, inner)
                self.index_methods(node.body, inner)

    def index_held(self, method: ast.FunctionDef, receiver: str | None, scope: _Scope) -> None:
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and node.attr in REGISTERING:
                self.registers = True
            if receiver is not None and isinstance(node, ASSIGNMENTS) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == receiver:
                        self.held.setdefault(target.attr, []).append((node.value, scope))

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

    def calls_implicitly(self, hook: str) -> None:
        """The unit being read may make torch call `hook` of any module of the submission's (it calls a value the
        reader cannot name, or formats one): an edge to each such method read, so that recursion through them is
        a cycle too."""
        if self.unit is not None and self.unit.name != "import":
            self.implicit[hook].add(id(self.unit.node))

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
            elif _named_lambda(node):
                self.lambda_body(node.value, scope)
            elif isinstance(node, ASSIGNMENTS) and node.value is not None:
                self.expression(node.value, scope)
        self.recursion()

    def lambda_body(self, node: ast.Lambda, scope: _Scope) -> None:
        """A lambda bound to a name, read as the def it stands for: its defaults where it is made, its body with
        its parameters."""
        for default in [*node.args.defaults, *filter(None, node.args.kw_defaults)]:
            self.expression(default, scope)
        self.expression(node.body, _Scope(node, scope.module, scope, _bindings([], parameters=node.args)))

    def recursion(self) -> None:
        for hook, callers in self.implicit.items():
            read = [id(unit.node) for unit in self.methods.get(hook, []) if id(unit.node) in self.units]
            for caller in callers:
                self.edges[caller].update(read)
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
                if _dunder(node.name):
                    self.refuse("dunder", node, scope, code=f"class {node.name}")
                self.class_header(node, scope)
            elif _exports(node):  # __all__ = ["causal_average", ...]: names, as text
                continue
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
            elif isinstance(node, ast.If) and _main_guard(node, scope) and not node.orelse:
                continue  # a demo under `if __name__ == "__main__":` never runs on import, and nothing rebinds __name__
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

    def base(self, node: ast.expr, scope: _Scope, *, reached: bool = False) -> None:
        """A base class: torch's (only nn.Module, in a class the code reaches: torch's other classes call their own
        methods, which a subclass may replace, out of the reader's sight) or the submission's, read whole."""
        chain = _chain(node)
        if chain is not None:
            root, attributes = chain
            found, bindings = scope.resolve(root.id)
            if found is None and root.id == "object" and not attributes:
                return
            for binding in bindings:
                if isinstance(binding, _Imported) and binding.library is not None:
                    path = ".".join([binding.library, *attributes])
                    torch_class = _torch_object(path)[1]
                    if _accepted_library(path) and isinstance(torch_class, type) and (
                            not reached or torch_class is torch.nn.Module):
                        return
                elif isinstance(binding, ast.ClassDef) and not attributes and found is not None:
                    self.reach(_Unit(binding, found, name=binding.name))
                    return
        self.refuse("base", node, scope, code=_code(node))

    def whole_class(self, node: ast.ClassDef, scope: _Scope) -> None:
        """A class the code names: every method may run (operators run them unseen), and what it derives from."""
        inner = self.class_scope(node, scope)
        for base in node.bases:
            self.base(base, scope, reached=True)
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef):
                if node.bases and statement.name in MODULE_OWN:
                    self.refuse("override", statement, inner, code=f"{node.name}.{statement.name}")
                elif statement.name in DIMENSIONS:
                    self.refuse("own_shape", statement, inner, code=f"{node.name}.{statement.name}")
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


def _exports(node: ast.stmt) -> bool:
    """`__all__ = [...]` of strings: the names a star import takes, which runs nothing."""
    return isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
        and node.targets[0].id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)) \
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)


def _main_guard(node: ast.If, scope: _Scope) -> bool:
    """`if __name__ == "__main__":` at the top of a file (a module's own name, which no code the reader accepts can
    bind: it refuses every binding of a double-underscore name)."""
    test = node.test
    if not (isinstance(scope.node, ast.Module) and isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {type(test.left), type(test.comparators[0])}
    name = next((s for s in (test.left, test.comparators[0]) if isinstance(s, ast.Name)), None)
    text = next((s for s in (test.left, test.comparators[0]) if isinstance(s, ast.Constant)), None)
    return sides == {ast.Name, ast.Constant} and name is not None and name.id == "__name__" \
        and text is not None and text.value == "__main__"
