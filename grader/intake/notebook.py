"""`notebook` turns Jupyter notebooks' code cells into exercise files: definitions in, running code out.

Only imports and top-level definitions (functions, classes, constants) are taken, each definition
going to the exercise file whose contract name it defines, with the helpers it uses. Everything else
at the top of a cell (a training loop, a print, a plot, `!pip`, a magic) is left out and counted, so a
notebook that trains for an hour grades in seconds and nothing it printed ever counts. As in the
notebook, a name defined twice keeps its last definition. Nothing here runs the notebook: cells are
parsed (`ast`) in the trusted process and run, like any submission, only in the sandbox.

A constant is kept only when nothing in it runs code at import: its value and its annotation alike
(`STEPS: exec(SRC) = 3` is code). A function or class is kept whole, as its cell wrote it: its decorators,
defaults, annotations and class body run at import, as its body runs when called, in the sandbox. What a
file is made of is exactly the statements judged, never the rest of their lines (`X = 1; train()`), and the
notebooks' names reach it only as one-line comments (a file name may hold newlines).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from grader.curriculum import EXERCISES
from grader.intake.imports import syntax_tree
from grader.lang import N_, plural, tr
from grader.text import clean

MAX_NOTEBOOK_BYTES = 32 * 2**20  # outputs (plots) make notebooks large; only the code cells are kept
OWNER = {name: exercise.file for exercise in EXERCISES for name in exercise.names}  # contract name -> its file
CONSTANT_CALLS = frozenset({"float", "int", "bool", "str", "tuple", "frozenset", "range"})
_MAGIC = re.compile(r"^(\s*)[%!].*$", re.MULTILINE)
_USE = re.compile(r"^\s*%grader\s+use\s+(.+?)\s*$", re.MULTILINE)
# A line as Python counts them (ast's line numbers): `\n`, `\r\n` and `\r` end one, nothing else.
_PYTHON_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class NotebookError(ValueError):
    """A notebook that cannot be read at all (not JSON, not nbformat 4)."""


@dataclass(frozen=True)
class Cell:
    where: str  # "cell 4 of lab.ipynb", as a student finds it (in the reader's language)
    source: str
    unreadable: str = ""  # set for a whole notebook that could not be read: why (its raw text is `source`)
    notebook: str = ""  # the notebook's name as the submission has it (a path in it), the same in every language


@dataclass
class _Definition:
    name: str
    code: str  # its lines as written (decorators included), or "" when its cell does not parse
    where: str
    order: tuple[int, int]  # (cell, line): where the definition that counts was written
    uses: frozenset[str] = frozenset()
    broken: str = ""  # why its cell could not be read


@dataclass
class Extracted:
    """The exercise files made from some notebooks, and one line on what was left out."""

    files: dict[str, bytes] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # file -> the cells its definitions come from
    notebooks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> the notebooks its code comes from
    notes: list[str] = field(default_factory=list)


def cells(data: bytes, *, name: str) -> list[Cell]:
    """The code cells of the notebook `data` (named `name`); NotebookError when it cannot be read."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(tr("{name} is over {size} MiB: clear its outputs and save it again", name=name,
                               size=MAX_NOTEBOOK_BYTES // 2**20))
    try:
        text = data.decode("utf-8")
        version = json.loads(text).get("nbformat")
        if version == 4:
            import nbformat  # here, not at the top: its schema validator costs every `grader check` 0.1 s

            notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
            found = [Cell(tr("cell {number} of {name}", number=number, name=name), _text(cell.get("source", "")),
                          notebook=name)
                     for number, cell in enumerate(notebook.cells, start=1) if cell.get("cell_type") == "code"]
    except Exception as error:  # the bytes are the submitter's: any way they fail to read is theirs
        raise NotebookError(tr("{name} is not a notebook Jupyter can open ({error}): open it in Jupyter and save it "
                               "again", name=name, error=type(error).__name__)) from None
    if version != 4:
        raise NotebookError(tr("{name} is in notebook format {version}, not 4: open it in Jupyter and save it again",
                               name=name, version=version))
    return found


def unreadable(data: bytes, *, name: str, why: str) -> Cell:
    """A notebook that could not be read, as one cell: the exercises its raw text seems to define fail with
    `why`, the others do not notice."""
    return Cell(name, data[:MAX_NOTEBOOK_BYTES].decode("utf-8", errors="replace"), unreadable=why, notebook=name)


@dataclass
class _Parsed:
    """What the cells define, in order: the definitions that count, every import, what was left out."""

    definitions: dict[str, _Definition] = field(default_factory=dict)
    imports: list[tuple[ast.stmt, str]] = field(default_factory=list)
    left_out: int = 0
    cells_left_out: set[str] = field(default_factory=set)


def _parse(found: list[Cell]) -> _Parsed:
    parsed = _Parsed()
    definitions = parsed.definitions
    for order, cell in enumerate(found):
        if cell.unreadable:
            for defined in _defined_in_text(cell.source, anywhere=True):
                definitions[defined] = _Definition(defined, "", cell.where, (order, 0), broken=cell.unreadable)
            continue
        source = _MAGIC.sub(lambda m: f"{m.group(1)}pass", cell.source)  # `!pip`, `%time`: never run, never parsed
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            why = _syntax(cell.where, error)
            for defined in _defined_in_text(cell.source):
                definitions[defined] = _Definition(defined, "", cell.where, (order, 0), broken=why)
            parsed.cells_left_out.add(cell.where)
            continue
        lines = _PYTHON_LINE.findall(source)  # not str.splitlines: it also ends a line at \x0c, \u2028, ...
        for statement in tree.body:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                parsed.imports.append((statement, _code(lines, statement)))
            elif (name := _defined_name(statement)) is not None:
                definitions[name] = _Definition(name, _code(lines, statement), cell.where,
                                                (order, statement.lineno), uses=frozenset(_names_used(statement)))
            elif not isinstance(statement, ast.Pass):  # a magic's line, already counted as a cell left out
                parsed.left_out += 1
                parsed.cells_left_out.add(cell.where)
    return parsed


def extract(found: list[Cell]) -> Extracted:
    """Exercise files from `found` cells, in order (the last definition of a name wins)."""
    parsed = _parse(found)
    extracted = Extracted()
    notebook_of = {cell.where: cell.notebook for cell in found}
    for exercise in EXERCISES:
        roots = [parsed.definitions[name] for name in exercise.names if name in parsed.definitions]
        if roots:
            text, chosen = _file(exercise.file, roots, parsed.definitions, parsed.imports)
            extracted.files[exercise.file] = text.encode()
            extracted.origins[exercise.file] = ", ".join(dict.fromkeys(root.where for root in roots))
            extracted.notebooks[exercise.file] = tuple(dict.fromkeys(notebook_of[d.where] for d in chosen))
    if parsed.left_out or parsed.cells_left_out:
        taken = sum(1 for d in parsed.definitions.values() if d.code)
        extracted.notes.append(tr(
            "from {cells}: took {taken} and the imports they use; left out {left_out} (in {cells_left_out})",
            cells=plural(len(found), N_("1 code cell"), N_("{count} code cells")),
            taken=plural(taken, N_("1 definition"), N_("{count} definitions")),
            left_out=plural(parsed.left_out, N_("1 top-level statement that runs code"),
                            N_("{count} top-level statements that run code")),
            cells_left_out=plural(len(parsed.cells_left_out), N_("1 cell"), N_("{count} cells"))))
    return extracted


def script(found: list[Cell]) -> tuple[str, list[str]]:
    """The imports and definitions of `found`, in order, as one script, and the names it defines: what
    `%grader use` runs in a kernel. A definition whose cell does not parse raises ImportError there."""
    parsed = _parse(found)
    parts = list(dict.fromkeys(code for statement, code in parsed.imports if not _is_future(statement)))
    for definition in sorted(parsed.definitions.values(), key=lambda d: d.order):
        body = definition.code or f"raise ImportError({definition.broken!r})\n"
        parts.append(f"\n{_comment(definition.where)}{body}")
    return "".join(parts), [name for name, d in parsed.definitions.items() if d.code]


def unparsed(data: bytes) -> str | None:
    """Why the exercise file `data`, made from notebook cells, stands for a cell that does not parse (as `_file`
    wrote it: read here, never run); None for any other file."""
    if (tree := syntax_tree(data)) is None:
        return None
    body = tree.body
    if len(body) == 2 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) and ast.unparse(body[1]) == "raise ImportError(__doc__)":
        return body[0].value.value
    return None


def definitions(source: str) -> dict[str, ast.stmt]:
    """The definitions one cell's `source` makes at its top, as `extract` takes them (the last of each name):
    none where it does not parse. Nothing here runs it."""
    try:
        tree = ast.parse(_MAGIC.sub(lambda m: f"{m.group(1)}pass", source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    return {name: statement for statement in tree.body if (name := _defined_name(statement)) is not None}


def uses(found: list[Cell]) -> list[str]:
    """The notebooks named by `%grader use ...` lines, in order: their definitions come before these cells'."""
    return [name for cell in found for line in _USE.findall(cell.source) for name in line.split()]


def _file(filename: str, roots: list[_Definition], definitions: dict[str, _Definition],
          imports: list[tuple[ast.stmt, str]]) -> tuple[str, list[_Definition]]:
    """One exercise file: its contract definitions, the helpers they use, the imports all of those need; and
    those definitions, in order."""
    broken = [d for d in roots if d.broken]
    if broken:
        return f"{broken[0].broken!r}\n\nraise ImportError(__doc__)\n", broken[:1]  # its docstring says why
    chosen: dict[str, _Definition] = {}
    from_siblings: dict[str, list[str]] = {}
    todo = list(roots)
    while todo:
        definition = todo.pop()
        if definition.name in chosen:
            continue
        chosen[definition.name] = definition
        for used in sorted(definition.uses):
            owner = OWNER.get(used)
            if owner is not None and owner != filename:
                from_siblings.setdefault(owner.removesuffix(".py"), []).append(used)
            elif used in definitions and definitions[used].code and used not in chosen:
                todo.append(definitions[used])
    needed = set().union(*(d.uses for d in chosen.values()))
    wanted = [(not _is_future(s), code) for s, code in imports if _binds(s) & needed or _is_future(s)]
    parts = list(dict.fromkeys(code for _, code in sorted(wanted, key=lambda pair: pair[0])))  # __future__ first
    for module, names in sorted(from_siblings.items()):
        parts.append(f"from .{module} import {', '.join(sorted(set(names)))}\n")
    ordered = sorted(chosen.values(), key=lambda d: d.order)
    for definition in ordered:
        # Never on line 1 or 2, where a comment's `coding: utf-7` would choose how the file is read.
        parts.append(f"\n\n{_comment(definition.where)}{definition.code}")
    return "".join(parts), ordered


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _code(lines: list[str], statement: ast.stmt) -> str:
    """The text of `statement` as its cell wrote it: a function's or class's whole lines (decorators included),
    a simple statement's own columns, never the statements that share its line (`SCALE = 2; train()`)."""
    end = statement.end_lineno or statement.lineno
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
        text = "".join(lines[first - 1:end])
    else:  # ast.get_source_segment's columns, without splitting the whole cell again for every statement
        text = "".join(lines[statement.lineno - 1:end]).encode()  # columns count UTF-8 bytes
        cut = len(text) - len(lines[end - 1].encode()) + (statement.end_col_offset or 0)
        text = text[statement.col_offset:cut].decode()
    return text if text.endswith("\n") else text + "\n"


def _comment(where: str) -> str:
    """A comment line naming the cell a definition comes from: one line whatever the notebook's name holds
    (`lab\\nimport os\\n.ipynb` would make the rest of its name code), its control characters escaped."""
    return f"# {clean(where, newlines=False)}\n"


def _defined_name(statement: ast.stmt) -> str | None:
    """The name a definition or constant binds; None for code that runs things."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name
    target = None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None and _constant(statement.annotation):
        target = statement.target  # a module's annotation runs at import, as its value does
    if isinstance(target, ast.Name) and _constant(statement.value):
        return target.id
    return None


def _constant(value: ast.expr | None) -> bool:
    """Built of literals, names and arithmetic, calling at most `float("-inf")`-like builtins and math."""
    for node in ast.walk(value) if value is not None else ():
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return False
        if isinstance(node, ast.Call):
            function = node.func
            plain = isinstance(function, ast.Name) and function.id in CONSTANT_CALLS
            maths = isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) \
                and function.value.id == "math"
            if not (plain or maths):
                return False
    return True


def _names_used(statement: ast.stmt) -> set[str]:
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name)}


def _binds(statement: ast.stmt) -> set[str]:
    names = statement.names if isinstance(statement, (ast.Import, ast.ImportFrom)) else []
    return {(alias.asname or alias.name).split(".")[0] for alias in names}


def _is_future(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"


def _defined_in_text(text: str, *, anywhere: bool = False) -> list[str]:
    """The contract names a cell that does not parse appears to define (`def attention(`, `class Encoder`);
    `anywhere`: not only at the start of a line (in a notebook's raw JSON)."""
    start = r"\b" if anywhere else r"^\s*"
    return [name for name in OWNER if re.search(rf"{start}(?:def|class)\s+{name}\b", text, re.MULTILINE)]


def _syntax(where: str, error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return tr("{where} does not parse (line {line}: {error}): fix it in the notebook and save", where=where,
                  line=error.lineno, error=error.msg)
    return tr("{where} could not be read ({error}): fix it in the notebook and save", where=where,
              error=type(error).__name__)
