"""`notebooks` writes one student notebook per exercise, generated from its stub in exercises/.

Each notebook teaches what the stub teaches: the stub's docstring as Markdown, the stub itself as the
code cell to fill in, a scratch cell (the attention one holds the course notes' worked example), and a
last cell that checks the saved notebook in the sandbox. An exercise that builds on earlier ones loads
their definitions from their notebooks (`%grader use`), in the kernel and when graded alike.

They are generated, never edited by hand: `python -m grader.student.notebooks` rewrites notebooks/
after a stub changes, and a kit test fails while they differ from a fresh build. A notebook is written in
the language of its stubs (`grader release --lang zh` builds Chinese ones from the Chinese stubs): its own
prose is marked with `N_` here and translated into that language, whatever language this process prints in.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import lang
from grader.curriculum import EXERCISES, Exercise
from grader.lang import N_

FOLDER = "notebooks"
# The course notes' worked example (note 3): five tokens, four features each, attending to each other.
WORKED_EXAMPLE = """\
{about}
import torch

x = torch.tensor([[1.0, 0.0, 1.0, 0.0],
                  [0.0, 1.0, 0.0, 1.0],
                  [1.0, 1.0, 0.0, 0.0],
                  [0.0, 0.0, 1.0, 1.0],
                  [1.0, 0.5, 0.5, 0.0]])
output, weights = attention(x, x, x)
print(weights)  # {rows}
"""
ABOUT_THE_EXAMPLE = N_(
    "The worked example of the course notes: five tokens with four features each, used as their own\n"
    "queries, keys and values. Row i of the weights says how much token i attends to each token.")
ROWS_OF_THE_EXAMPLE = N_("each row sums to 1; softmax(x @ x.T / 2) row by row")
SCRATCH = N_("Try your code here: this cell is never graded, and neither is any other code that runs things.")
INTRODUCTION = N_(
    "Complete the code below: it is `exercises/{file}` of the kit, as a notebook. Run it, try it in the scratch "
    "cell, then **save the notebook** and run the last cell: it grades the saved notebook in a sandbox, exactly as "
    "`grader check {exercise}` does. Only imports and definitions are graded; code that runs things (prints, plots, "
    "training) is left out.")
BUILDS_ON = N_("This exercise builds on earlier ones: the next cell loads your definitions from their notebooks "
               "(definitions only: nothing else in them runs), here and when this notebook is graded.")
CHECK = N_("## Check\n\nSave the notebook first: the check grades what is saved.")
_SIBLING_IMPORT = re.compile(r"^from \.(\w+) import [^\n]*\n", re.MULTILINE)
# A browser shows a line break inside a paragraph as a space, which between two Chinese characters is a gap in the
# middle of a word: a docstring's lines, wrapped for the editor, are joined there for the notebook.
_WIDE = "\u2014\u2018-\u201d\u2026\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_BREAK_BETWEEN_WIDE = re.compile(f"(?<=[{_WIDE}])\n {{0,3}}(?=[{_WIDE}])")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")


def name_of(exercise: Exercise) -> str:
    """`01-attention.ipynb`: the curriculum's order first, so that a folder lists them as students meet them."""
    return f"{EXERCISES.index(exercise) + 1:02d}-{exercise.id}.ipynb"


def build(exercise: Exercise, stub: str, *, language: str = "en") -> nbformat.NotebookNode:
    """The notebook of `exercise`, from the source of its stub, its own prose in `language`."""
    tree = ast.parse(stub)
    docstring = ast.get_docstring(tree, clean=True) or exercise.id
    title, _, teaching = docstring.partition("\n")
    body = stub.splitlines(keepends=True)[tree.body[0].end_lineno:] if ast.get_docstring(tree) else stub
    code = "".join(body).lstrip("\n")
    used = [sibling for sibling in _SIBLING_IMPORT.findall(code) if sibling != "config"]
    code = _SIBLING_IMPORT.sub(lambda m: "" if m.group(1) != "config" else m.group(0), code)
    code = re.sub(r"\n{4,}", "\n\n\n", code.replace("from .config import", "from exercises.config import"))
    number = EXERCISES.index(exercise) + 1
    # Only the blank lines after the title go: a formula or diagram that opens the teaching keeps its indentation,
    # so that Markdown shows it as the code block it is (stripped, its first line ran into the lines under it).
    teaching = _LEADING_BLANK_LINES.sub("", teaching.rstrip())
    cells = [
        new_markdown_cell(f"# {number}. {title}\n\n{_BREAK_BETWEEN_WIDE.sub('', teaching)}"),
        new_markdown_cell(_say(language, INTRODUCTION, file=exercise.file, exercise=exercise.id)),
    ]
    setup = "%load_ext grader"
    if used:
        notebooks = " ".join(name_of(_by_id(sibling)).removesuffix(".ipynb") for sibling in used)
        cells.append(new_markdown_cell(_say(language, BUILDS_ON)))
        setup += f"\n%grader use {notebooks}"
    cells += [
        new_code_cell(setup),
        new_code_cell(code.rstrip("\n")),
        new_code_cell(_scratch(exercise, language)),
        new_markdown_cell(_say(language, CHECK)),
        new_code_cell(f"%grader check {exercise.id}"),
    ]
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"{exercise.id.replace('_', '-')}-{index}"  # stable ids: a rebuild is byte-identical
    return notebook


def build_all(exercises: Path, *, language: str = "en") -> dict[str, str]:
    """Every exercise's notebook, by file name, as the text `nbformat` writes; `exercises` holds stubs in `language`."""
    return {name_of(exercise): nbformat.writes(
                build(exercise, (exercises / exercise.file).read_text(encoding="utf-8"), language=language)) + "\n"
            for exercise in EXERCISES if (exercises / exercise.file).is_file()}  # a release ships one track's


def write_all(exercises: Path, into: Path, *, language: str = "en") -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in build_all(exercises, language=language).items():
        (into / name).write_text(text, encoding="utf-8")
        written.append(into / name)
    return written


def _scratch(exercise: Exercise, language: str) -> str:
    """The cell to try things in: for attention, the course notes' worked example, to run on the student's own code."""
    if exercise.id != "attention":
        return _comment(_say(language, SCRATCH))
    return WORKED_EXAMPLE.format(about=_comment(_say(language, ABOUT_THE_EXAMPLE)),
                                 rows=_say(language, ROWS_OF_THE_EXAMPLE)).rstrip("\n")


def _comment(text: str) -> str:
    return "\n".join(f"# {line}" for line in text.splitlines())


def _say(language: str, message: str, /, **fields: str) -> str:
    """`message` (marked with `N_`) in `language`, its `{placeholders}` filled from `fields`."""
    text = lang.translations(language).gettext(message)
    return text.format(**fields) if fields else text


def _by_id(exercise_id: str) -> Exercise:
    return next(exercise for exercise in EXERCISES if exercise.id == exercise_id)


if __name__ == "__main__":
    from grader.kit import kit_root

    root = kit_root()
    for path in write_all(root / "exercises", root / FOLDER):
        print(path.relative_to(root), file=sys.stdout)
