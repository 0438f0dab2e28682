"""`vocabulary` is what the loop reader knows: the nodes, torch, math and builtins it accepts, and its messages."""

from __future__ import annotations

import ast
import functools
import types
from dataclasses import dataclass

import torch

from grader.lang import N_, tr
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
                           "torch.nn.init.Callable",
                           # modules that call the modules or callables they are handed, as many times as they
                           # are told (a container of T, TransformerEncoder(layer, num_layers=T), lobpcg's tracker)
                           "torch.nn.Container", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
                           "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.DataParallel",
                           "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder",
                           "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
                           "torch.nn.TripletMarginWithDistanceLoss", "torch.lobpcg",
                           "torch.nn.functional.triplet_margin_with_distance_loss"})
# What torch itself calls of a submission's nn.Module: forward (the module called) and extra_repr (the module
# printed or formatted). A method named like another of nn.Module's would be called by torch out of the reader's
# sight (`train` on every child), so a class may not define one.
MODULE_HOOKS = frozenset({"forward", "extra_repr"})
# What the reader takes for a tensor's few dimensions, so a class of the submission's may not have its own.
DIMENSIONS = frozenset({"shape"})
# How a module can hold another without `self.name = ...`, which is how the reader knows what a module holds.
REGISTERING = frozenset({"add_module", "register_module", "_modules", "__dict__", "__setattr__"})
MODULE_OWN = frozenset(name for name in dir(torch.nn.Module)
                       if not (name.startswith("__") and name.endswith("__"))) - MODULE_HOOKS
MATH = frozenset({"math.pi", "math.e", "math.inf", "math.nan", "math.tau", "math.sqrt", "math.log", "math.log2",
                  "math.log10", "math.exp", "math.ceil", "math.floor", "math.isqrt", "math.pow", "math.fabs",
                  "math.isfinite", "math.isinf", "math.isnan", "math.gcd", "math.prod"})
# Builtins on dimensions and numbers; the iterating ones only over a parameter's .shape (or a literal).
BUILTINS = frozenset({"int", "float", "bool", "len", "abs", "round", "min", "max", "isinstance", "print", "range",
                      "enumerate", "Exception", "AttributeError", "ZeroDivisionError", "ArithmeticError", "LookupError",
                      "slice", "super", "tuple", "list", "all", "any", "sum", "map", "ValueError", "TypeError",
                      "RuntimeError", "IndexError", "KeyError", "AssertionError", "NotImplementedError"})
ITERATING = frozenset({"tuple", "list", "all", "any", "sum", "min", "max", "map", "enumerate"})
# Builtins that turn values into text, read only in a message (raise, assert, print, a module's extra_repr).
TEXT_BUILTINS = frozenset({"str", "repr", "format"})
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
# How a message names each comprehension (a catalog message: through `tr` where it is shown).
COMPREHENSIONS = {ast.ListComp: N_("a list comprehension"), ast.SetComp: N_("a set comprehension"),
                  ast.DictComp: N_("a dict comprehension"), ast.GeneratorExp: N_("a generator expression")}
PLAIN_EXPRESSIONS = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript,
                     ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.JoinedStr, ast.FormattedValue)
ANNOTATION_NODES = (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Tuple, ast.List, ast.BinOp, ast.BitOr,
                    ast.Load)

_TOP_OF_FILE = N_("keep only imports, definitions and constants at the top of the file; try code out in a notebook "
                  "or another file, not in an `if __name__ == \"__main__\":` block")
_PLAIN_CODE = N_("keep to assignments, if, return and calls of torch functions and tensor methods")
_ONE_PRODUCT = N_("build the (T, T) weights once and use one matrix product, weights @ x")
# What the reader saw ({code} is the submission's own text, shortened), and the hint that goes with it: catalog
# messages, shown through `tr` (see `_refusal`).
MESSAGES: dict[str, tuple[str, str]] = {
    "loop": (N_("{kind} over {code}, which runs Python code once per element"),
             N_("build the (T, T) weights once and use one matrix product, weights @ x; a loop may only go over a "
                "parameter's .shape (its few dimensions)")),
    "shape": (N_("{kind} over {code}, the .shape of something that is not a parameter: its length can be anything"),
              N_("loop only over a parameter's .shape (its few dimensions), or better, not at all: build the (T, T) "
                 "weights once and use one matrix product, weights @ x")),
    "shape_work": (N_("{code} in a loop over {shape}, where only the dimensions may be checked or converted"),
                   N_("loop over a .shape only to check its dimensions (assert d > 0, int(d)); do the work with "
                      "tensor operations, outside any loop")),
    "while": (N_("a while loop"), _ONE_PRODUCT),
    "recursion": (N_("{code} runs itself again, a loop by recursion"),
                  N_("compute the result in one pass of tensor operations; a function must not call itself")),
    "callback": (N_("{code} handed to {callee}(), which may call it once per element"),
                 N_("pass tensors and numbers to functions, never a function: call your own function yourself, "
                    "once, on whole tensors")),
    "lambda": (N_("a lambda"), N_("write a plain def and call it yourself, once, on whole tensors")),
    "function_value": (N_("{code} used as a value (stored, handed on or returned) instead of called"),
                       N_("call your functions and classes by name, f(x), and hand them only tensors and numbers: a "
                          "function passed around can run once per element, or call itself")),
    "text": (N_("{kind}, which turns values into text outside a message"),
             N_("keep f-strings and % formatting to the messages of raise, assert and print")),
    "annotation": (N_("the annotation {code}, which runs code when the def runs"),
                   N_("annotate with a plain type (torch.Tensor, int) or leave the annotation out")),
    "dunder": (N_("{code}, a double-underscore name"),
               N_("write plain functions and names: Python's own __names__ (operators, __name__) run code out of "
                  "the reader's sight; try code out in a notebook or another file, not in an "
                  "`if __name__ == \"__main__\":` block")),
    "top_if": (N_("`if {code}:` at the top of the file, which runs at import"), _TOP_OF_FILE),
    "top_code": (N_("a {kind} statement that runs at import"), _TOP_OF_FILE),
    "dead": (N_("the guard `if {code}:`, whose branch never runs or always runs"), N_("remove the dead branch")),
    "statement": (N_("a {kind} statement"), _PLAIN_CODE),
    "expression": ("{kind}", _PLAIN_CODE),
    "library": (N_("{code}, from {library}, which the grader does not read"),
                N_("use torch (torch, torch.nn.functional, tensor methods) and math only: other libraries work out "
                   "of the grader's sight")),
    "torch": (N_("{code}, which calls Python code, reads files or leaves torch"),
              N_("use torch's tensor operations (torch.tril, torch.ones, masked_fill, softmax, @)")),
    "builtin": (N_("the builtin {code}"), N_("only int, float, bool, len, abs, round, min, max, isinstance, print, "
                                             "range and, over a parameter's .shape, tuple, list, sum, all, any, "
                                             "enumerate and map(int, ...) are read")),
    "iterating": (N_("{code}() over {argument}, which is not a parameter's .shape"),
                  N_("use tensor operations (x.sum(dim=...), torch.stack) instead of Python's iteration")),
    "leaves_torch": (N_("the method .{code}(), which leaves torch or runs a function per element"),
                     N_("stay with tensor operations: .numpy(), .tolist() and hooks move the work out of torch")),
    "attribute": (N_("the attribute .{code}, which the reader does not know of a tensor"),
                  N_("call torch functions and tensor methods; attributes of other objects are not read")),
    "twice": (N_("{code} bound a second time (first on line {first})"),
              N_("define each name once at the top of the file: the grader reads the one definition a name has")),
    "decorator": (N_("the decorator @{code}, which the reader does not know"),
                  N_("use only @torch.no_grad(), @functools.lru_cache, @staticmethod, @classmethod or @property")),
    "target": (N_("an assignment to {code}"), N_("assign to names and to items (out[i] = ...), not to attributes")),
    "base": (N_("a class built on {code}, which the reader does not know"),
             N_("derive only from nn.Module or from your own plain classes")),
    "class_keyword": (N_("the class keyword {code}="),
                      N_("write a plain class, without a metaclass or class keywords")),
    "star": (N_("an import of *"), N_("import the names you use, by name")),
    "starred": (N_("*{code}, which Python unpacks one element at a time"),
                N_("unpack only a .shape (x.view(*x.shape[:-1], 2, -1)); hand whole tensors to torch "
                   "functions instead")),
    "repeated": (N_("{code}, a sequence of objects repeated as many times as a number says"),
                 N_("repeat only constants ([1] * n, [None] * n); build the (T, T) weights once and use one matrix "
                    "product, weights @ x")),
    "own_shape": (N_("{code}, a .shape of a class's own, which the reader takes for a tensor's dimensions"),
                  N_("give it another name: .shape is read as a tensor's few dimensions")),
    "override": (N_("the method {code}, named like nn.Module's own, which torch calls out of the grader's sight"),
                 N_("give your method another name: torch calls only forward (and extra_repr) of a module by itself")),
    "unreadable": (N_("{code}, from {module}.py, which the grader cannot read"),
                   N_("define it in a file the grader reads (one of your exercise files), or use torch")),
    "not_defined": (N_("{code} is not defined by a plain def"),
                    N_("define it with `def`, at the top level of the file")),
    "unparsable": (N_("the file could not be parsed"), N_("fix the syntax error first")),
    "nested": (N_("code nested too deeply for the reader"), N_("split long expressions into several lines")),
}


@dataclass(frozen=True)
class Refusal:
    """A line of the submission the reader could not accept: what it saw there, and a hint for the student."""

    file: str
    line: int
    what: str
    hint: str

    def __str__(self) -> str:
        return tr("{file} line {line}: {what}", file=self.file, line=self.line, what=self.what)



def _refusal(file: str, line: int, message: str, **values: str) -> Refusal:
    """The refusal `message` at `file`'s `line`, in the reader's language; `values` fill its placeholders (a `kind`
    the caller has translated already, the submission's own code as it is)."""
    what, hint = MESSAGES[message]
    shown = {key: clean(value, newlines=False) for key, value in values.items()}
    return Refusal(file, line, tr(what, **shown), tr(hint))


def _code(node: ast.AST, limit: int = 48) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


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

def _loop(iterable: ast.expr) -> str:
    """The message for a loop the reader refuses: over a shape (of what is not a parameter), or over anything."""
    if isinstance(iterable, ast.Subscript):
        iterable = iterable.value
    shape = isinstance(iterable, ast.Attribute) and iterable.attr == "shape"
    return "shape" if shape or (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute)
                                and iterable.func.attr == "size") else "loop"



def _kind(node: ast.AST) -> str:
    """How a message names a statement or expression, in the reader's language: "try" (Python's own word, as it
    is), "an assignment expression (:=)"."""
    named = {ast.NamedExpr: N_("an assignment expression (:=)"), ast.Await: N_("an await"), ast.Yield: N_("a yield"),
             ast.YieldFrom: N_("a yield from"), ast.ClassDef: N_("class (inside a function)"),
             ast.AugAssign: N_("augmented assignment")}
    if type(node) in named:
        return tr(named[type(node)])
    return "async def" if isinstance(node, ast.AsyncFunctionDef) else type(node).__name__.lower()
