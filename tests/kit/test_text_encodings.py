"""The grader names the encoding of every text file it reads or writes.

Without `encoding=`, Python uses the locale's: cp936 on a Chinese Windows, cp1252 on an English one, so a
report, a feedback file or a stub with Chinese in it is corrupted there, or does not open at all. The kit
works in UTF-8 everywhere. This test reads the grader's source (`ast` only, nothing is imported or run) and
names each call that opens a file as text without saying how it is encoded:

- `open(...)`, `io.open(...)` and `os.fdopen(...)` with no mode or a mode without "b";
- `<path>.open(MODE)` (pathlib's) with a text MODE, or with no argument at all;
- `tempfile.NamedTemporaryFile`, `TemporaryFile` and `SpooledTemporaryFile` with a text mode;
- `<path>.read_text()` and `<path>.write_text(data)`.

An encoding given by position counts as given (`read_text("utf-8")`; importlib.metadata's `read_text(filename)`,
which decodes UTF-8 itself, passes this way too). A mode that is not a literal is not judged, nor a call that
passes `**keywords`.
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[2] / "grader"

TEMPORARY_FILES = {"NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"}
MODE_LETTERS = set("rwxabt+U")
# The position of the mode and of the encoding among each kind of call's arguments (None: no mode argument).
BUILTIN_OPEN = (1, 3)  # open(file, mode, buffering, encoding), io.open and os.fdopen(fd, mode, buffering, encoding)
PATH_OPEN = (0, 2)  # Path.open(mode, buffering, encoding)
TEMPORARY = (0, 2)  # NamedTemporaryFile(mode, buffering, encoding, ...)
READ_TEXT = (None, 0)  # Path.read_text(encoding, errors)
WRITE_TEXT = (None, 1)  # Path.write_text(data, encoding, errors, newline)


def _name(func: ast.expr) -> tuple[str | None, str | None]:
    """(`module`, `name`) of `module.name(...)`, (None, `name`) of `name(...)` or `anything.name(...)`."""
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return owner, func.attr
    return None, None


def _mode(node: ast.Call, position: int) -> str | None:
    """The call's mode when it is a literal; "" when the call gives none; None when it cannot be told."""
    given = [k.value for k in node.keywords if k.arg == "mode"]
    if not given and len(node.args) > position:
        given = [node.args[position]]
    if not given:
        return ""
    value = given[0]
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def _signature(node: ast.Call) -> tuple[int | None, int] | None:
    """Where the mode and the encoding go, when `node` may open a file as text; None for any other call."""
    owner, name = _name(node.func)
    if name == "open" and (isinstance(node.func, ast.Name) or owner == "io"):
        return BUILTIN_OPEN
    if name == "fdopen" and owner == "os":
        return BUILTIN_OPEN
    if name == "open" and isinstance(node.func, ast.Attribute) and owner != "os":
        # A method called open: pathlib's takes the mode first. Others (a session's, a zip's, urllib's) take
        # something else first, never a literal made of mode letters alone.
        if not node.args and not node.keywords:
            return PATH_OPEN
        mode = _mode(node, PATH_OPEN[0])
        return PATH_OPEN if mode and set(mode) <= MODE_LETTERS else None
    if name in TEMPORARY_FILES:
        return TEMPORARY
    if name == "read_text" and isinstance(node.func, ast.Attribute):
        return READ_TEXT
    if name == "write_text" and isinstance(node.func, ast.Attribute):
        return WRITE_TEXT
    return None


def _without_encoding(node: ast.Call) -> bool:
    signature = _signature(node)
    if signature is None or any(k.arg is None for k in node.keywords):  # not a file, or **keywords
        return False
    mode_at, encoding_at = signature
    if mode_at is not None:
        mode = _mode(node, mode_at)
        default_binary = _name(node.func)[1] in TEMPORARY_FILES  # their mode is "w+b" unless told
        if mode is None or "b" in mode or (mode == "" and default_binary):
            return False
    return not any(k.arg == "encoding" for k in node.keywords) and len(node.args) <= encoding_at


def offenders(root: Path | None = None) -> list[str]:
    """`file:line: call` of each text open, read or write under `root` (the grader) that names no encoding."""
    root = root or GRADER
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent).as_posix()
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{relative}:{node.lineno}: {ast.unparse(node.func)}(...)" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and _without_encoding(node)]
    return sorted(found, key=lambda line: (line.split(":")[0], int(line.split(":")[1])))


def test_every_text_file_names_its_encoding() -> None:
    found = offenders()
    assert not found, ("these open, read or write a text file in the locale's encoding (cp936 on a Chinese "
                       "Windows): add encoding=\"utf-8\"\n  " + "\n  ".join(found))



def test_the_check_sees_each_kind_of_call(tmp_path: Path) -> None:
    """The check finds what it must and nothing else, on a module written for it."""
    package = tmp_path / "grader"
    package.mkdir()
    (package / "sample.py").write_text(
        "import io, os, tempfile\n"
        "open(p)\n"                                        # 2: no mode, text
        "open(p, 'w')\n"                                   # 3
        "open(p, 'rb')\n"
        "open(p, mode='a', encoding='utf-8')\n"
        "open(p, 'r', -1, 'utf-8')\n"
        "io.open(p, 'r')\n"                                # 7
        "os.fdopen(fd, 'w')\n"                             # 8
        "os.fdopen(fd, 'rb')\n"
        "os.open(p, os.O_RDONLY)\n"
        "path.open()\n"                                    # 11
        "path.open('a')\n"                                 # 12
        "path.open('rb')\n"
        "path.open('w', encoding='utf-8')\n"
        "session.open(path, device='cpu')\n"
        "archive.open('member.py')\n"
        "tempfile.NamedTemporaryFile(mode='w')\n"          # 17
        "tempfile.NamedTemporaryFile()\n"
        "tempfile.TemporaryFile('w+', encoding='utf-8')\n"
        "path.read_text()\n"                               # 20
        "path.read_text(encoding='utf-8')\n"
        "dist.read_text('direct_url.json')\n"
        "path.write_text(text)\n"                          # 23
        "path.write_text(text, encoding='utf-8', newline='\\n')\n"
        "path.write_text(text, **options)\n"
        "open(p, mode)\n",
        encoding="utf-8",
    )
    assert [int(line.split(":")[1]) for line in offenders(package)] == [2, 3, 7, 8, 11, 12, 17, 20, 23]
