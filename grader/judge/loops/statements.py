"""`statements` reads the body of a submission's function, statement by statement, and the loops it may hold."""

from __future__ import annotations

import ast

from grader.judge.loops.expressions import _Expressions
from grader.judge.loops.scopes import _comprehension_scope, _named_lambda, _Scope, _Unit
from grader.judge.loops.vocabulary import (
    ASSIGNMENTS,
    COMPREHENSIONS,
    DIMENSION_CALLS,
    DIMENSION_NODES,
    DIMENSIONS,
    _code,
    _dunder,
    _kind,
    _loop,
)
from grader.lang import tr


class _FunctionBodies(_Expressions):
    """The reader's part that reads function bodies: what a statement may be, what it assigns to, what it loops over."""

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
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult) and (
                    self.repeated(node.target, scope) or self.repeated(node.value, scope)):
                self.refuse("repeated", node, scope, code=_code(node))  # rows *= T
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self.target(target, scope)
            if isinstance(node, ast.AnnAssign):
                self.annotation(node.annotation, scope)
            if _named_lambda(node):  # f = lambda w: ...: read as a def, here and now
                self.reach(_Unit(node, scope, name=node.targets[0].id))
            elif node.value is not None:
                self.expression(node.value, scope)
        elif isinstance(node, ast.Return):
            if node.value is not None and self.unit is not None and self.unit.name.endswith(".extra_repr"):
                self.message(node.value, scope, formats_modules=False)  # text for torch's repr of the module
            elif node.value is not None:
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
                self.refuse(_loop(node.iter), node, scope, kind=tr("a for loop"), code=_code(node.iter))
            else:
                self.dimension_work([*node.body, *node.orelse], node.target, node.iter, scope)
            self.target(node.target, scope)
            self.expression(node.iter, scope)
            self.statements(node.body, scope)
            self.statements(node.orelse, scope)
        elif isinstance(node, ast.While):
            self.refuse("while", node, scope)
        elif isinstance(node, ast.Try):  # each block once, in order: no code runs more often than it is written
            self.statements(node.body, scope)
            for handler in node.handlers:
                if handler.type is not None:
                    self.expression(handler.type, scope)
                if handler.name is not None and _dunder(handler.name):
                    self.refuse("dunder", handler, scope, code=handler.name)
                self.statements(handler.body, scope)
            self.statements(node.orelse, scope)
            self.statements(node.finalbody, scope)
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
            if node.attr in DIMENSIONS:  # self.shape = [self] * n: the reader takes .shape for dimensions
                self.refuse("own_shape", node, scope, code=_code(node))
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
        """`x.shape`, `x.size()`, a slice of them or `enumerate` of one, with `x` a parameter: a few dimensions, never
        the positions."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" \
                and len(node.args) == 1 and not node.keywords and scope.resolve("enumerate")[0] is None:
            node = node.args[0]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            node = node.value
        if isinstance(node, ast.Call) and not node.args and not node.keywords and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "size":
            node = node.func
        elif not (isinstance(node, ast.Attribute) and node.attr == "shape"):
            return False
        return isinstance(node.value, ast.Name) and scope.parameter(node.value.id)

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp,
                      scope: _Scope) -> None:
        inner = _comprehension_scope(node, scope)
        for number, generator in enumerate(node.generators):
            where = scope if number == 0 else inner  # the first iterable is evaluated outside the comprehension
            if not self.over_shape(generator.iter, where):
                self.refuse(_loop(generator.iter), node, scope, kind=tr(COMPREHENSIONS[type(node)]),
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
