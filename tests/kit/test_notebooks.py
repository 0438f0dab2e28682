"""Notebook submissions: definitions are taken from the code cells, running code never is, and the same
code scores the same in a notebook as in .py files.

The notebooks here are written the way students write them: definitions spread over cells, with
experiments, prints, `!pip` and magics between them, a first attempt redefined later, helpers used by
a definition in a cell of their own.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.curriculum import FIRST
from grader.intake import notebook
from grader.intake.submission import Submission, load
from grader.text import clean

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"
STUB = "def attention(query, key, value, dropout=None, mask=None):\n    raise NotImplementedError\n"


def _as_notebook_cell(source: str) -> str:
    """A solution file as a student pastes it into a cell: the kit's package imports spelled absolutely."""
    return re.sub(r"^from \.(\w+) import", r"from exercises.\1 import", source, flags=re.MULTILINE)


def _write(path: Path, *cells: str, markdown: str = "# Lab") -> Path:
    nbformat.write(new_notebook(cells=[new_markdown_cell(markdown), *map(new_code_cell, cells)]), path)
    return path


def _solutions_notebook(path: Path, *, swap: dict[str, str] | None = None) -> Path:
    """The reference solutions as one notebook, one cell per exercise, with experiments between them."""
    cells = ["!pip install torch\n%matplotlib inline\nimport torch\nprint(torch.__version__)"]
    for exercise in FIRST.exercises:  # the course: a notebook class of the second track is graded alike
        source = (swap or {}).get(exercise.id) or (SOLUTIONS / exercise.file).read_text()
        cells += [_as_notebook_cell(source), f"for _ in range(3):\n    print({exercise.names[0]!r})"]
    return _write(path, *cells)


def _extract(*cells: str) -> notebook.Extracted:
    return notebook.extract([notebook.Cell(f"cell {n} of lab.ipynb", source) for n, source in enumerate(cells, 1)])


# --- what is taken from the cells, in the trusted process (nothing runs) -----------------------------------


def test_only_definitions_and_the_imports_they_use_are_taken():
    made = _extract(
        "import math\nimport torch\nimport matplotlib.pyplot as plt\nSCALE = 1 / math.sqrt(2)",
        STUB,
        "q = torch.randn(2, 3)\nprint(attention(q, q, q))\nplt.plot([1, 2])\nopen('/etc/passwd').read()",
        "def _scores(q, k):\n    return q @ k.transpose(-2, -1) * SCALE\n",
        "def attention(query, key, value, dropout=None, mask=None):\n    p = _scores(query, key).softmax(-1)\n"
        "    return p @ value, p\n",
        "%%time\ntrain_for_an_hour()",
    )
    source = made.files["attention.py"].decode()
    assert list(made.files) == ["attention.py"]
    assert "NotImplementedError" not in source, "the last definition of a name must win, as in the notebook"
    for kept in ("import math", "SCALE = 1 / math.sqrt(2)", "def _scores", "def attention"):
        assert kept in source
    for left_out in ("import torch", "matplotlib", "print", "/etc/passwd", "train_for_an_hour", "randn"):
        assert left_out not in source
    assert "left out 5 top-level statements that run code (in 2 cells)" in made.notes[0], made.notes
    compile(source, "attention.py", "exec")


def test_a_definition_that_uses_another_exercise_imports_it_from_the_submission():
    made = _extract("import torch\n" + STUB, "class MultiHeadAttention(torch.nn.Module):\n"
                    "    def forward(self, q, k, v, mask=None):\n        return attention(q, k, v, mask=mask)[0]\n")
    source = made.files["multi_head_attention.py"].decode()
    assert "from .attention import attention" in source and "def attention" not in source


def test_a_cell_that_does_not_parse_fails_only_the_exercises_it_defines():
    made = _extract("import torch", STUB, "class HeadAttention(torch.nn.Module:\n    pass\n")
    assert "NotImplementedError" in made.files["attention.py"].decode()
    broken = made.files["head_attention.py"].decode()
    with pytest.raises(ImportError, match=r"^cell 3 of lab\.ipynb does not parse \(line 1: .*fix it in the notebook"):
        exec(compile(broken, "head_attention.py", "exec"), {})
    # What the student reads: the cell and its line, never a head_attention.py the student does not have.
    assert notebook.unparsed(made.files["head_attention.py"]).startswith("cell 3 of lab.ipynb does not parse")
    assert notebook.unparsed(made.files["attention.py"]) is None


@pytest.mark.slow
def test_a_cell_that_does_not_parse_is_named_in_the_feedback(grader_cli, tmp_path: Path):
    path = _write(tmp_path / "01-attention.ipynb", "import torch\ndef attention(query, key, value, dropout=None, "
                  "mask=None):\n    scores = query @ key.transpose(-2, -1\n    return scores\n")
    done = grader_cli.check(path, tmp_path / "report.json")
    messages = [t["message"] for e in done.report["exercises"] for t in e["tests"] if t["outcome"] != "passed"]
    assert messages and all(m.startswith("cell 2 of 01-attention.ipynb does not parse (line 3:") for m in messages)
    assert not any("attention.py" in m.replace("01-attention.ipynb", "") for m in messages), messages[0]


def test_a_notebook_that_cannot_be_read_fails_only_the_exercises_it_defines(tmp_path: Path):
    folder = tmp_path / "submission"
    folder.mkdir()
    _write(folder / "01-attention.ipynb", STUB)
    (folder / "02-masking.ipynb").write_text('{"cells": [{"source": "def causal_mask(seq_len):", ')  # cut short
    loaded = load(folder)
    assert "def attention" in loaded.files["attention.py"].decode()
    assert "02-masking.ipynb is not a notebook Jupyter can open" in loaded.files["masking.py"].decode()
    old = json.loads(nbformat.writes(new_notebook(cells=[new_code_cell(STUB)])))
    old["nbformat"] = 3
    (tmp_path / "old.ipynb").write_text(json.dumps(old))
    assert "in notebook format 3, not 4" in load(tmp_path / "old.ipynb").files["attention.py"].decode()


def test_py_files_win_over_notebooks_and_notebooks_fill_in_the_rest(tmp_path: Path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention.py").write_text("# the .py one\n" + STUB)
    _write(folder / "lab.ipynb", "def attention(q, k, v, dropout=None, mask=None):\n    return 1\n",
           "import torch\ndef causal_mask(seq_len):\n    return torch.zeros(1, 1, seq_len, seq_len)\n")
    (folder / ".ipynb_checkpoints").mkdir()
    _write(folder / ".ipynb_checkpoints" / "lab-checkpoint.ipynb", "def causal_average(x):\n    return x\n")
    loaded = load(folder)
    assert loaded.files["attention.py"].decode().startswith("# the .py one")
    assert set(loaded.files) == {"attention.py", "masking.py"}
    assert loaded.shown("masking.py") == "cell 3 of lab.ipynb"
    assert loaded.shown("attention.py").endswith("attention.py")


def test_a_stub_never_hides_a_notebooks_work(tmp_path: Path):
    """The whole repository handed in (the Actions workflow grades it so): exercises/ as it came, in either language,
    the notebooks filled. The notebooks' definitions stand in for the untouched stubs, and a note says so; a stub
    with work of its own still wins."""
    folder = tmp_path / "repository"
    (folder / "exercises").mkdir(parents=True)
    (folder / "notebooks").mkdir()
    for stub in (REPO / "exercises").glob("*.py"):
        (folder / "exercises" / stub.name).write_bytes(stub.read_bytes().replace(b"\n", b"\r\n"))
    chinese = REPO / "grader" / "locale" / "zh" / "exercises" / "masking.py"
    (folder / "exercises" / "masking.py").write_bytes(chinese.read_bytes())
    (folder / "exercises" / "head_attention.py").write_text("# started\n" + STUB)
    _write(folder / "notebooks" / "01-attention.ipynb", _as_notebook_cell((SOLUTIONS / "attention.py").read_text()))
    _write(folder / "notebooks" / "02-masking.ipynb", _as_notebook_cell((SOLUTIONS / "masking.py").read_text()),
           "def head_attention_helper():\n    return 1\n")
    loaded = load(folder)
    assert loaded.files["attention.py"] != (REPO / "exercises" / "attention.py").read_bytes()
    assert loaded.shown("attention.py") == "cell 2 of notebooks/01-attention.ipynb"
    assert loaded.shown("masking.py") == "cell 2 of notebooks/02-masking.ipynb"
    assert loaded.sources["attention.py"] == ("notebooks/01-attention.ipynb",)
    assert loaded.sources["head_attention.py"] == ("exercises/head_attention.py",)
    assert Submission.from_json(json.loads(json.dumps(loaded.to_json()))) == loaded  # as a cluster's worker has it
    assert loaded.files["head_attention.py"].startswith(b"# started"), "a stub with work of its own wins"
    assert any("attention.py is the kit's untouched stub" in note for note in loaded.notes), loaded.notes
    assert loaded.files["encoder.py"] == (REPO / "exercises" / "encoder.py").read_bytes().replace(b"\n", b"\r\n")
    # The generated notebooks hold the stubs' own code: untouched, they stand in for nothing.
    _write(folder / "notebooks" / "07-encoder.ipynb", (REPO / "exercises" / "encoder.py").read_text())
    assert load(folder).files["encoder.py"] == loaded.files["encoder.py"]
    assert not any("encoder.py" in note for note in load(folder).notes)


# --- graded end to end: a notebook scores as its code does in .py files --------------------------------------


@pytest.mark.slow
def test_a_class_of_notebooks_scores_as_the_same_code_in_py_files(grader_cli, tmp_path: Path):
    """`grader batch` over notebooks, a zip holding one, and the same code as .py folders: the same scores."""
    mistake = (REPO / "solutions" / "mistakes" / "attention" / "no_scaling.py")
    wrong = mistake.read_text() if mistake.is_file() else (SOLUTIONS / "attention.py").read_text().replace(
        "/ math.sqrt(d_k)", "")
    klass = tmp_path / "class"
    klass.mkdir()
    _solutions_notebook(klass / "right.ipynb").rename(klass / "right-notebook.ipynb")
    for name, swap in (("right", {}), ("wrong", {"attention": wrong})):
        folder = klass / f"{name}-py"
        folder.mkdir()
        for exercise in FIRST.exercises:
            (folder / exercise.file).write_text(swap.get(exercise.id) or (SOLUTIONS / exercise.file).read_text())
    notebooks = klass / "wrong-notebooks"
    notebooks.mkdir()
    _solutions_notebook(notebooks / "lab.ipynb", swap={"attention": wrong})
    with zipfile.ZipFile(klass / "right-zipped.zip", "w") as archive:
        archive.write(klass / "right-notebook.ipynb", "handin/lab.ipynb")
    # right-notebook.ipynb stays a bare notebook in the class folder: a submission of its own

    out = tmp_path / "out"
    run = grader_cli.run("batch", str(klass), "--out", str(out), "--suite", "public", "--jobs", "2")
    assert run.returncode == 0, run.describe()
    scores = {p.stem: {e["id"]: e["score"] for e in json.loads(p.read_text())["exercises"]}
              for p in out.glob("*.json") if p.stem != "summary"}
    assert scores["right-notebook"] == scores["right-zipped"] == scores["right-py"]
    assert sum(scores["right-py"].values()) == FIRST.points
    assert scores["wrong-notebooks"] == scores["wrong-py"]
    assert scores["wrong-py"]["attention"] < 10
    report = json.loads((out / "right-notebook.json").read_text())
    assert any("left out" in warning and "top-level statements" in warning for warning in report["warnings"])
    # Each report names what it graded for each exercise: a path in the submission, in every language the same.
    files = {p.stem: {e["id"]: e["files"] for e in json.loads(p.read_text())["exercises"]}
             for p in out.glob("*.json") if p.stem != "summary"}
    assert all(f == ["right-notebook.ipynb"] for f in files["right-notebook"].values()), files["right-notebook"]
    assert files["right-zipped"]["encoder"] == ["handin/lab.ipynb"]
    assert files["right-py"]["attention"] == ["attention.py"]


@pytest.mark.slow
def test_gradescope_grades_a_handed_in_notebook_as_it_grades_the_same_code(tmp_path: Path, gradescope):
    """Through the Gradescope deployment of test_recipes.py: setup.sh, then run_autograder."""
    handin = tmp_path / "handin"
    handin.mkdir()
    _solutions_notebook(handin / "lab.ipynb")
    status, results, stderr = gradescope.run(handin, bwrap_refused=False)
    assert gradescope.sandbox() not in (None, "none"), results["output"] + stderr[-2000:]
    assert status == 0 and results["score"] == 100, results["output"] + stderr[-2000:]


def test_a_notebook_graded_alone_never_reads_the_notebooks_it_names(tmp_path: Path):
    """`%grader use` is for the student's own kernel: graded, a notebook cannot pull in a classmate's next to it."""
    _write(tmp_path / "classmate.ipynb", "def attention(query, key, value, dropout=None, mask=None):\n    return 1\n")
    _write(tmp_path / "mine.ipynb", "%load_ext grader\n%grader use classmate ../classmate",
           "def causal_average(x):\n    return x\n")
    loaded = load(tmp_path / "mine.ipynb")
    assert list(loaded.files) == ["masking.py"]


# --- what a notebook cannot smuggle in: its name, an annotation, the rest of a line -------------------------

# Notebook names are the student's: on Linux a file name may hold newlines (and so lines of code), a `coding:`
# comment, bytes that are not UTF-8.
CODE_LIKE_NAMES = ["lab\nimport os\nos._exit(0)\n#.ipynb", "lab\rimport os\r#.ipynb", "lab\u2028os._exit(0).ipynb",
                   "-*- coding: utf-7 -*-.ipynb", "lab\udcff.ipynb"]
# No import: a comment naming the notebook comes first in the file, where a `coding:` one would count.
PLAIN_CELLS = ("NOTE = '+AGE-'  # UTF-7 would read an a", "print('an experiment')",
               "def attention(query, key, value, dropout=None, mask=None):\n    return NOTE\n")


def _statements(source: str) -> set[str]:
    return {ast.get_source_segment(source, node) or "" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.stmt)}


@pytest.mark.parametrize("name", CODE_LIKE_NAMES, ids=repr)
def test_a_notebooks_name_never_becomes_code(tmp_path: Path, name: str):
    plain = load(_write(tmp_path / "lab.ipynb", *PLAIN_CELLS)).files["attention.py"]
    made = load(_write(tmp_path / name, *PLAIN_CELLS)).files["attention.py"]
    text = made.decode()
    # Read as Python reads the file (its bytes: a `coding:` comment would count), it is the plain one's code.
    assert ast.dump(ast.parse(made)) == ast.dump(ast.parse(plain)), text
    assert not {"import os", "os._exit(0)"} & _statements(text), text
    assert f"\n# cell 4 of {clean(name, newlines=False)}\ndef attention(" in text, "the comment should still say where"
    cells = notebook.cells((tmp_path / name).read_bytes(), name=name)
    source, names = notebook.script(cells)  # what `%grader use` runs in the student's kernel
    assert ast.dump(ast.parse(source)) == ast.dump(ast.parse(notebook.script(
        notebook.cells((tmp_path / "lab.ipynb").read_bytes(), name="lab.ipynb"))[0])), source
    assert names == ["NOTE", "attention"]


def test_a_constant_is_kept_only_when_its_annotation_runs_no_code_either():
    """A module's annotations run at import: `STEPS: exec(SRC, globals()) = 3` is code, not a constant."""
    made = _extract("SRC = 'print(1)'\nSTEPS: int = 3\nSCALE: exec(SRC, globals()) = 2\nSHIFT: math.tau = 1",
                    "def attention(query, key, value, dropout=None, mask=None):\n    return STEPS * SCALE * SHIFT\n")
    source = made.files["attention.py"].decode()
    assert "STEPS: int = 3" in source and "SHIFT: math.tau = 1" in source, "a plain annotation should be kept"
    assert "exec" not in source and "SCALE:" not in source, source
    assert "left out 1 top-level statement that runs code (in 1 cell)" in made.notes[0], made.notes
    assert notebook.script([notebook.Cell("cell 1 of lab.ipynb", "X: exec('1') = 1\nY: float = 2.0")])[1] == ["Y"]


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x1c", "\x85"], ids=repr)
def test_a_kept_statement_brings_nothing_else_of_its_line(separator: str):
    """`SCALE = 2; train()` keeps `SCALE = 2` alone; a separator Python does not end a line at (but
    `str.splitlines` does) in a comment cannot shift which lines a definition is taken from."""
    made = _extract("import math; print('imported')\nSCALE = 2; train_for_an_hour()",
                    f"#{separator}\ntrain_for_an_hour()\n"
                    "def attention(query, key, value, dropout=None, mask=None):\n"
                    "    return math.pi * SCALE\n    pass\n")
    source = made.files["attention.py"].decode()
    assert "train_for_an_hour" not in source and "print" not in source, source
    assert "import math\n" in source and "SCALE = 2\n" in source and "    return math.pi * SCALE\n    pass\n" in source
    assert "left out 3 top-level statements that run code (in 2 cells)" in made.notes[0], made.notes
    compile(source, "attention.py", "exec")


@pytest.mark.slow
def test_a_notebook_named_like_code_grades_as_the_same_notebook_named_plainly(warm_grader, tmp_path: Path):
    cell = _as_notebook_cell((SOLUTIONS / "attention.py").read_text())
    (tmp_path / "plain").mkdir()
    (tmp_path / "code-like").mkdir()
    plain = _write(tmp_path / "plain" / "lab.ipynb", cell, "print('an experiment')")
    code_like = _write(tmp_path / "code-like" / CODE_LIKE_NAMES[0], cell, "print('an experiment')")
    runs = warm_grader.grade([(plain, ["attention"]), (code_like, ["attention"])])
    for run in runs:
        assert run.returncode == 0 and not run.report_problems(), run.describe()
    scores = [run.exercise("attention")["score"] for run in runs]
    assert scores[1] == scores[0] == 10, [run.feedback("attention") for run in runs]
