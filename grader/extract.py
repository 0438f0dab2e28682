"""`extract` finds the messages a part of the kit shows, for its catalog: a Babel extraction method, and a checker.

A message is found where it is written in English:
- the first argument of `tr(...)` or `N_(...)` (`N_` marks text kept for later and shown through `tr(text)`);
- the text given to a judge helper's `name=`, `what=` or `hint=` (`assert_close(..., hint="...")`), and a known
  mistake's `diagnosis=`: the helpers translate these themselves, so a test author writes plain English there.

`extract` is a Babel extraction method (a mapping file's `[grader.extract:extract: **.py]`, or
`extract_from_dir`'s method map, as tests/kit/test_lang.py uses it).
`untranslatable` names what can never be translated: a student-facing message built as an f-string or given as
bare text, where no catalog can reach it (`assert ok, f"..."`, `raise AssertionError("...")`, `hint=f"..."`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import IO, Any

FUNCTIONS = ("tr", "N_")
KEYWORDS = ("name", "what", "hint", "diagnosis")
# Exceptions whose message a student reads: built with tr(...), never from bare text.
RAISED = ("AssertionError", "SubmissionFailure", "NotImplementedYet", "fail")
_PROSE = re.compile(r"[A-Za-z]{2,}[,:;]? +[A-Za-z]{2,}")
_CODE = re.compile(r"`[^`]*`")


def needs_translation(message: str) -> bool:
    """Whether `message` holds English prose (two words in a row, outside code spans); "p_attn.sum(dim=-1)" does not."""
    return bool(_PROSE.search(_CODE.sub("", re.sub(r"\{\w+\}", "", message))))


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def messages(source: str) -> Iterator[tuple[int, str]]:
    """(line, message) for every message `source` writes, in order."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if _called(node) in FUNCTIONS and node.args and (text := _text(node.args[0])) is not None:
            yield node.lineno, text
        for keyword in node.keywords:
            if keyword.arg in KEYWORDS and (text := _text(keyword.value)) is not None and needs_translation(text):
                yield keyword.value.lineno, text


def untranslatable(source: str) -> Iterator[tuple[int, str]]:
    """(line, why) for every student-facing message in `source` that no catalog can translate."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and node.msg is not None and _bare(node.msg):
            yield node.lineno, "an assert's message is bare text: write it as tr(\"...\", field=value)"
        if not isinstance(node, ast.Call):
            continue
        if _called(node) in RAISED and node.args and _bare(node.args[0]):
            yield node.lineno, f"{_called(node)}'s message is bare text: write it as tr(\"...\", field=value)"
        if _called(node) in FUNCTIONS and node.args and isinstance(node.args[0], (ast.JoinedStr, ast.BinOp)):
            yield node.lineno, f"{_called(node)}() is given a built string: give it a template and fields"
        for keyword in node.keywords:
            if keyword.arg in KEYWORDS and isinstance(keyword.value, (ast.JoinedStr, ast.BinOp)) and _has_prose(
                    keyword.value):
                yield keyword.value.lineno, f"{keyword.arg}= is built from pieces: give it text or tr(...)"


def _bare(node: ast.AST) -> bool:
    """Text a student would read that does not come from tr(...): a literal or an f-string with prose in it."""
    return isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)) and _has_prose(node)


def _has_prose(node: ast.AST) -> bool:
    """Whether English prose is in `node` outside every tr(...) and N_(...) call."""
    if isinstance(node, ast.Call) and _called(node) in FUNCTIONS:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and needs_translation(node.value)
    return any(_has_prose(child) for child in ast.iter_child_nodes(node))


def extract(fileobj: IO[bytes], keywords: Any, comment_tags: Any, options: dict[str, Any]
            ) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extraction method interface: (line, function, message, comments)."""
    for line, message in messages(fileobj.read().decode(options.get("encoding", "utf-8"))):
        yield line, "tr", message, []
