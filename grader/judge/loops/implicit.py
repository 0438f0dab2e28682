"""`implicit` is what the reader knows of Python's implicit calls: what a call of a value it cannot name may run,
which sequences are repeated, what a module's attribute holds, and which values are only numbers."""

from __future__ import annotations

import ast

from grader.judge.loops.scopes import _chain, _Imported, _Scope
from grader.judge.loops.vocabulary import (
    ASSIGNMENTS,
    COMPREHENSIONS,
    DEFINITIONS,
    FUNCTIONS,
    MODULE_OWN,
    _accepted_library,
)


class _ImplicitCalls:
    """The part of the expression reader (`_Expressions`, built on it) that follows what Python or torch runs
    without a call in sight: a module called through a value (its forward), a sequence repeated."""

    def repeated(self, node: ast.expr, scope: _Scope) -> bool:
        """Whether `node`, an operand of `*`, is a sequence holding more than constants (a display, a comprehension,
        or a name bound to one): repeated, it hands the same objects to whatever walks it, as often as a number
        says."""
        if isinstance(node, ast.Name):
            found, bindings = scope.resolve(node.id)
            return found is not None and any(  # `steps = [m]`, not `a, b = f(), 1.0` (b is not the tuple)
                isinstance(b, ASSIGNMENTS) and b.value is not None and self.repeated(b.value, found)
                and any(isinstance(t, ast.Name) for t in (b.targets if isinstance(b, ast.Assign) else [b.target]))
                for b in bindings)
        if isinstance(node, tuple(COMPREHENSIONS)):
            return True
        if isinstance(node, ast.Subscript):  # [m][0:1] * T
            return self.repeated(node.value, scope)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
                and scope.resolve(node.func.id)[0] is None:
            return not node.args or self.repeated(node.args[0], scope) or not self.dimensions(node.args[0], scope)
        return isinstance(node, (ast.List, ast.Tuple)) and not all(_constant(e) for e in node.elts)


    def unnamed(self, func: ast.expr, scope: _Scope) -> bool:
        """Whether a call's callee is a value the reader cannot name (a variable, a parameter, `self.inner`, a call's
        result): it may be a module of the submission's, whose forward the call runs."""
        chain = _chain(func)
        if chain is None:
            return not isinstance(func, ast.Attribute)  # x.sum(1).mean(): a method, followed by name
        root, attributes = chain
        found, bindings = scope.resolve(root.id)
        if found is None:
            return False  # a builtin
        if root.id == scope.receiver and scope.parameter(root.id):
            return not attributes or (len(attributes) == 1 and attributes[0] not in self.methods
                                      and attributes[0] not in MODULE_OWN and not self.torch_held(attributes[0]))
        named = all(isinstance(b, (_Imported, *DEFINITIONS)) for b in bindings)
        if attributes:  # a library's function, a submission module's, a method followed by name, or what an
            # instance holds (`other = self; other.inner(x)`)
            return not named and attributes[-1] in self.held and not self.torch_held(attributes[-1])
        return not named


    def torch_held(self, attribute: str) -> bool:
        """Whether every assignment of `self.<attribute>`, in any class, is a module or tensor torch builds
        (`self.soft = nn.Softmax(dim=-1)`): calling it runs torch's code only."""
        held = self.held.get(attribute, [])
        return not self.registers and bool(held) and all(
            _constant(value) or self.torch_built(value, scope) for value, scope in held)


    def torch_built(self, node: ast.expr, scope: _Scope) -> bool:
        chain = _chain(node.func) if isinstance(node, ast.Call) else None
        if chain is None:
            return False
        root, attributes = chain
        found, bindings = scope.resolve(root.id)
        return found is not None and len(bindings) == 1 and isinstance(bindings[0], _Imported) \
            and bindings[0].library is not None and _accepted_library(".".join([bindings[0].library, *attributes]))



def _constant(node: ast.expr) -> bool:
    """A constant, a sign in front of one, or slice(...) of them: a value no code of the submission's runs for."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "slice":
        return not node.keywords and all(_constant(a) for a in node.args)
    return isinstance(node, ast.Constant)


def _shape(node: ast.expr, scope: _Scope) -> bool:
    """`q.shape`, `q.size()`, a slice of them, or a name bound only to one (`shape = q.shape[:-1]`, `*batch, T, C =
    q.shape`): dimensions, whatever `q` is; unpacked, they are numbers, for which no code of the submission's runs.
    Or a function's own `*args`: a tuple as long as its callers wrote, each of them read."""
    if isinstance(node, ast.Name):
        found, bindings = scope.resolve(node.id)
        if found is not None and isinstance(found.node, FUNCTIONS) and bindings == [found.node.args.vararg]:
            return True
        return found is not None and bool(bindings) and all(
            isinstance(b, ast.Assign) and len(b.targets) == 1 and _binds(b.targets[0], node.id)
            and _shape(b.value, found) for b in bindings)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        node = node.value
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
        return isinstance(node, ast.Attribute) and node.attr == "size"
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def _binds(target: ast.expr, name: str) -> bool:
    """Whether an assignment's target binds `name` to the value, or to part of it (`*batch, T, C = ...`)."""
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, ast.Tuple):
        return any((isinstance(e, ast.Starred) and isinstance(e.value, ast.Name) and e.value.id == name)
                   or (isinstance(e, ast.Name) and e.id == name) for e in target.elts)
    return False
