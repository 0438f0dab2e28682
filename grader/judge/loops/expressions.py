"""`expressions` reads a submission's expressions: names, followed to what binds them, attributes and calls."""

from __future__ import annotations

import ast
import builtins

from grader.judge.loops.scopes import Binding, _chain, _Imported, _method, _Scope, _Unit
from grader.judge.loops.vocabulary import (
    ASSIGNMENTS,
    ATTRIBUTES,
    BUILTINS,
    COMPREHENSIONS,
    DEFINITIONS,
    FUNCTIONS,
    ITERATING,
    METHODS,
    MODULE_OWN,
    PLAIN_EXPRESSIONS,
    _accepted_library,
    _code,
    _dunder,
    _kind,
    _leaves_torch,
    _library_function,
)
from grader.lang import tr


class _Expressions:
    """The reader's part that reads expressions; its bookkeeping (`refuse`, `reach`, `class_scope`), statements and
    loops (`target`, `over_shape`, `comprehension`) are in the classes built on it, `_FunctionBodies` and `_Reader`."""

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
            self.refuse("text", node, scope,
                        kind=tr("an f-string") if isinstance(node, ast.JoinedStr) else tr("% formatting"))
        elif isinstance(node, ast.Starred):
            constants = isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Mult) and any(
                isinstance(side, (ast.List, ast.Tuple)) and all(_constant(e) for e in side.elts)
                for side in (node.value.left, node.value.right))  # *[1] * (x.dim() - 2): numbers
            if not (constants or self.dimensions(node.value, scope) or _shape(node.value, scope)):
                self.refuse("starred", node, scope, code=_code(node.value))
            self.expression(node.value, scope)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and (
                self.repeated(node.left, scope) or self.repeated(node.right, scope)):
            self.refuse("repeated", node, scope, code=_code(node))
            self.expression(node.left, scope)
            self.expression(node.right, scope)
        elif isinstance(node, PLAIN_EXPRESSIONS):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expression(child, scope)
        elif isinstance(node, ast.Lambda):
            self.refuse("lambda", node, scope)
        else:
            self.refuse("expression", node, scope, kind=_kind(node))

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
        return isinstance(node, (ast.List, ast.Tuple)) and not all(_constant(e) for e in node.elts)

    def message(self, node: ast.expr, scope: _Scope) -> None:
        """The message of a raise, an assert or a print: text may be built there, it goes nowhere the code reads.
        Formatting a module of the submission's calls its extra_repr."""
        if not _constant(node):
            self.calls_implicitly("extra_repr")
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
        if self.unnamed(node.func, scope):
            self.calls_implicitly("forward")  # a module held in a variable or an attribute: its forward runs
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
        if attributes:
            return False  # a library's function, a submission module's, or a method followed by name
        return not all(isinstance(b, (_Imported, *DEFINITIONS)) for b in bindings)

    def torch_held(self, attribute: str) -> bool:
        """Whether every assignment of `self.<attribute>`, in any class, is a module or tensor torch builds
        (`self.soft = nn.Softmax(dim=-1)`): calling it runs torch's code only."""
        held = self.held.get(attribute, [])
        return bool(held) and all(_constant(value) or self.torch_built(value, scope) for value, scope in held)

    def torch_built(self, node: ast.expr, scope: _Scope) -> bool:
        chain = _chain(node.func) if isinstance(node, ast.Call) else None
        if chain is None:
            return False
        root, attributes = chain
        found, bindings = scope.resolve(root.id)
        return found is not None and len(bindings) == 1 and isinstance(bindings[0], _Imported) \
            and bindings[0].library is not None and _accepted_library(".".join([bindings[0].library, *attributes]))

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


def _constant(node: ast.expr) -> bool:
    """A constant, a sign in front of one, or slice(...) of them: a value no code of the submission's runs for."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "slice":
        return not node.keywords and all(_constant(a) for a in node.args)
    return isinstance(node, ast.Constant)


def _shape(node: ast.expr, scope: _Scope) -> bool:
    """`q.shape`, `q.size()`, a slice of them, or a name bound only to one: dimensions, whatever `q` is; unpacked,
    they are numbers, for which no code of the submission's runs."""
    if isinstance(node, ast.Name):
        found, bindings = scope.resolve(node.id)
        return found is not None and bool(bindings) and all(
            isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Name)
            and _shape(b.value, found) for b in bindings)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        node = node.value
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        node = node.func
        return isinstance(node, ast.Attribute) and node.attr == "size"
    return isinstance(node, ast.Attribute) and node.attr == "shape"


def _super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
        and not node.keywords

