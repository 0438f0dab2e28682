"""`expressions` reads a submission's expressions: names, followed to what binds them, attributes and calls."""

from __future__ import annotations

import ast
import builtins

from grader.judge.loops.implicit import _constant, _ImplicitCalls, _shape
from grader.judge.loops.scopes import Binding, _chain, _Imported, _method, _named_lambda, _Scope, _Unit
from grader.judge.loops.vocabulary import (
    ASSIGNMENTS,
    ATTRIBUTES,
    BUILTINS,
    COMPREHENSIONS,
    DEFINITIONS,
    FUNCTIONS,
    ITERATING,
    METHODS,
    PLAIN_EXPRESSIONS,
    TEXT_BUILTINS,
    _accepted_library,
    _code,
    _dunder,
    _kind,
    _leaves_torch,
    _library_function,
)
from grader.lang import tr


class _Expressions(_ImplicitCalls):
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

    def message(self, node: ast.expr, scope: _Scope, *, formats_modules: bool = True) -> None:
        """The message of a raise, an assert or a print: text may be built there, it goes nowhere the code reads.
        Formatting a module of the submission's calls its extra_repr (an extra_repr's own text formats the
        module's settings: were it to format a module, the lines that runs are counted, test_masking)."""
        if formats_modules and not _constant(node):
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
            if node.id not in BUILTINS and not (self.in_message and node.id in TEXT_BUILTINS):
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
            text = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            if not (self.in_message and text and node.attr == "format" and called):  # "got {}".format(x.shape)
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
            elif attribute in self.methods:  # obj.mT.real: a property named like a tensor's attribute runs
                for unit in self.methods[attribute]:
                    self.reach(unit)
                continue
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
            if isinstance(binding, DEFINITIONS) or (  # or an alias of one, `_run = _Helper.run`, or a named lambda
                    isinstance(binding, ast.Assign) and not attributes
                    and (isinstance(found.node, ast.Module) or _named_lambda(binding))
                    and self.function(binding.value, found, depth + 1)):
                return True
        # a value's attribute: x.sum is a bound method, x.dtype is not
        return bool(attributes) and (attributes[-1] in METHODS or attributes[-1] in self.methods)

    def dimensions(self, node: ast.expr, scope: _Scope) -> bool:
        """What an iterating builtin may go over: a parameter's .shape, a comprehension (itself read), a literal."""
        return self.over_shape(node, scope) or isinstance(node, (*COMPREHENSIONS, ast.Tuple, ast.List, ast.Set))


def _super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" \
        and not node.keywords

