"""The student notebooks: generated from the stubs, so they cannot drift; run in a real kernel, they check
the saved notebook from their last cell and show what a student needs to read.

These tests start Jupyter kernels (nbclient and ipykernel, the dev extra), as a student's Jupyter does.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.curriculum import BY_ID, TRACKS, with_prerequisites
from grader.release import build
from grader.student import notebooks

REPO = Path(__file__).resolve().parents[2]
KERNEL_TIMEOUT_S = 240


def test_the_committed_notebooks_are_a_fresh_build_of_the_stubs():
    built = notebooks.build_all(REPO / "exercises")
    committed = {path.name: path.read_text() for path in (REPO / notebooks.FOLDER).glob("*.ipynb")}
    assert set(committed) == set(built)
    stale = [name for name, text in built.items() if committed[name] != text]
    assert not stale, f"{stale} differ from the stubs: run `python -m grader.student.notebooks` and commit"


def test_each_notebook_teaches_its_stub_and_ends_with_the_check():
    for exercise in BY_ID.values():
        stub = (REPO / "exercises" / exercise.file).read_text()
        notebook = nbformat.reads(notebooks.build_all(REPO / "exercises")[notebooks.name_of(exercise)], 4)
        nbformat.validate(notebook)
        first_line = stub.split('"""')[1].splitlines()[0]
        assert first_line in notebook.cells[0].source
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        assert any(f"class {name}" in c or f"def {name}" in c for c in code for name in exercise.names)
        assert code[-1].endswith(f"%grader check {exercise.id}")
        assert not any("from ." in c for c in code), "a notebook cell cannot import relatively"


def test_the_student_release_ships_the_notebooks(tmp_path: Path):
    """A release ships the notebook of every exercise it ships: the first track's by default, the second's with
    --track modern (numbered as in the curriculum: 10-rope first)."""
    for track in TRACKS:
        written = build(tmp_path / track.id, track=track.id)
        assert sorted(p.name for p in written if p.parts[0] == notebooks.FOLDER) == sorted(
            notebooks.name_of(e) for e in with_prerequisites(track)), track.id


def _run(path: Path, *, path_told: bool = True, unsaved: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """Run the saved notebook at `path` in a fresh kernel, as a student's Jupyter would, errors and all; without
    `path_told`, as nbclient, papermill or an older front end would: the kernel is not told the notebook's path.
    `unsaved`: a cell's code as edited in the browser and run, never saved (the cell that defines the key)."""
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, 4)
    for name, source in (unsaved or {}).items():
        next(c for c in notebook.cells if c.cell_type == "code" and f"def {name}" in c.source).source = source
    client = nbclient.NotebookClient(notebook, timeout=KERNEL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("JPY_SESSION_NAME", None)
    if path_told:
        env["JPY_SESSION_NAME"] = str(path)
    client.execute(env=env, cwd=str(path.parent))
    return notebook


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
                   + "".join(output.get("traceback", [])) for output in cell.outputs)


@pytest.mark.slow
def test_an_untouched_notebook_shows_the_next_step_and_a_filled_one_full_marks(tmp_path: Path):
    """The saved notebook is graded, and the table says which. Fixed and run but not saved, the saved stub scores 0
    and one line says the kernel ran code the notebook does not hold; saved, it scores full marks, without it."""
    folder = tmp_path / "notebooks"
    notebooks.write_all(REPO / "exercises", folder)
    path = folder / notebooks.name_of(BY_ID["attention"])
    solution = (REPO / "solutions" / "attention.py").read_text()

    untouched = _run(path, unsaved={"attention": solution})
    last = _text(untouched.cells[-1])
    next_step = r"attention: not implemented yet .* open cell \d+ of 01-attention\.ipynb"
    assert "0/10" in last and re.search(next_step, last), last
    said = [line for line in last.splitlines() if "not saved in 01-attention.ipynb" in line]
    assert len(said) == 1 and "(the definition of attention)" in said[0] and "save it" in said[0], last
    assert re.search(r"attention .* 01-attention\.ipynb", last), last  # the table's "Graded from"

    filled = nbformat.read(path, 4)
    stub_cell = next(c for c in filled.cells if c.cell_type == "code" and "def attention" in c.source)
    stub_cell.source = solution
    filled.cells.insert(filled.cells.index(stub_cell) + 1, nbformat.v4.new_code_cell("print('an experiment')"))
    nbformat.write(filled, path)
    done = _run(path)
    example = next(c for c in done.cells if c.cell_type == "code" and "worked example" in c.source)
    assert "tensor(" in _text(example)
    last = _text(done.cells[-1])
    assert "10/10" in last and "Error" not in last and "not saved" not in last, last


@pytest.mark.slow
def test_a_kernel_not_told_its_notebook_says_so_and_grades_nothing_else(tmp_path: Path):
    """Without the notebook's path the check cannot know what to grade: one line says so and how to name it; it
    never grades exercises/ (here the stubs, which would answer 'not implemented yet' for a filled notebook)."""
    folder = tmp_path / "notebooks"
    notebooks.write_all(REPO / "exercises", folder)
    cell = _run(folder / notebooks.name_of(BY_ID["attention"]), path_told=False).cells[-1]
    last = _text(cell)
    assert "cannot tell which notebook this cell runs in" in last and "--submission 01-attention.ipynb" in last, last
    assert "not implemented yet" not in last and "0/10" not in last, last
    # One line, as docs/jupyter.md says: IPython shows a magic's UsageError so, never a traceback.
    assert not [output for output in cell.outputs if output.get("output_type") == "error"], cell.outputs
    said = [line for output in cell.outputs if output.get("name") == "stderr" for line in output["text"].splitlines()]
    assert len(said) == 1 and said[0].startswith("UsageError: cannot tell which notebook"), said


@pytest.mark.slow
def test_a_notebook_that_builds_on_others_uses_their_definitions_in_the_kernel_and_when_graded(tmp_path: Path):
    folder = tmp_path / "notebooks"
    notebooks.write_all(REPO / "exercises", folder)
    for exercise_id in ("masking", "multi_head_attention"):
        path = folder / notebooks.name_of(BY_ID[exercise_id])
        filled = nbformat.read(path, 4)
        stub_cell = next(c for c in filled.cells if (c.cell_type == "code" and f"def {BY_ID[exercise_id].names[0]}"
                         in c.source) or f"class {BY_ID[exercise_id].names[0]}" in c.source)
        source = (REPO / "solutions" / BY_ID[exercise_id].file).read_text()
        stub_cell.source = source.replace("from .config import", "from exercises.config import").replace(
            "from .masking import causal_mask\n", "")
        nbformat.write(filled, path)
    shutil.copy(REPO / "solutions" / "attention.py", tmp_path / "unused.py")  # nothing reads stray files
    done = _run(folder / notebooks.name_of(BY_ID["multi_head_attention"]))
    use_cell = next(c for c in done.cells if c.cell_type == "code" and "%grader use" in c.source)
    assert "from 02-masking.ipynb:" in _text(use_cell) and "causal_mask" in _text(use_cell)
    last = _text(done.cells[-1])
    assert "15/15" in last, last
    assert "grader-cell-" not in last and "04-multi_head_attention.ipynb" in last, last  # the notebook, not a copy


def test_the_kernel_is_said_to_differ_only_for_code_run_after_the_last_save():
    """Saved code cells and their counts against the kernel's history (`ran[n]`, execution n): only a definition run
    after the last save and held by no saved cell is the kernel differing; a cell saved but not run again is not."""
    from grader.student.unsaved import SavedCell, saved_cells, unsaved

    stub, check = "def attention(q, k, v):\n    raise NotImplementedError\n", "%grader check attention"
    fixed = "import torch\n\ndef attention(q, k, v):\n    return q @ k.mT @ v  # fixed\n"
    later = "def attention(q, k, v):\n    return torch.softmax(q @ k.mT, -1) @ v\n"
    notebook = [SavedCell("import torch", None), SavedCell(stub, None), SavedCell(check, None)]
    assert unsaved(["", "import torch", fixed, check], notebook, ["attention"]) == ["attention"]  # run, never saved
    respaced = fixed.replace("# fixed", "# comments and spacing are not code").replace("\n\n", "\n")
    saved = [SavedCell(respaced, 2), SavedCell(check, 3)]
    assert unsaved(["", "import torch", fixed, check], saved, ["attention"]) == []
    edited = [SavedCell("import torch", 1), SavedCell(later, 2), SavedCell(check, 3)]  # edited and saved, not run
    assert unsaved(["", "import torch", fixed, check], edited, ["attention"]) == []
    assert unsaved(["", "import torch", check], notebook, ["attention"]) == []  # never run here
    ran_saved = [SavedCell("import torch", 1), SavedCell(stub, 2), SavedCell(check, 3)]  # saved after a run
    assert unsaved(["", "import torch", stub, check, later, check], ran_saved, ["attention"]) == ["attention"]
    # The counts of a notebook saved before this kernel started are another kernel's.
    assert unsaved(["", "import torch", fixed, check], ran_saved, ["attention"]) == []
    assert unsaved(["", "import torch", fixed], ran_saved, ["attention"], saved_before_kernel=True) == ["attention"]
    # Run out of order, a saved cell is not unsaved work; a helper the definition uses is compared too.
    twice = [SavedCell(fixed, None), SavedCell(later, None)]
    assert unsaved(["", later, fixed], twice, ["attention"]) == []
    helper = "SCALE = 2.0\ndef attention(q, k, v):\n    return SCALE * q\n"
    assert unsaved(["", helper, "SCALE = 3.0"], [SavedCell(helper, None)], ["attention"]) == ["SCALE"]
    cells = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(stub, execution_count=4)])
    assert saved_cells(nbformat.writes(cells).encode()) == [SavedCell(stub, 4)]


def test_bad_input_from_a_cell_raises_one_clear_error_never_system_exit():
    import grader

    with pytest.raises(grader.CheckError, match=r"^unknown exercise 'nope'"):
        grader.check("nope", submission=REPO / "solutions")
    with pytest.raises(grader.CheckError, match="does not exist"):
        grader.check("attention", submission=REPO / "no-such-folder")
    with pytest.raises(grader.CheckError, match="quote them"):
        grader.student.jupyter.grader_magic('check "attention')


def test_the_notebook_is_found_from_what_jupyter_and_vs_code_tell_the_kernel(tmp_path: Path, monkeypatch):
    from grader.student.jupyter import this_notebook

    folder = tmp_path / "course" / "notebooks"
    folder.mkdir(parents=True)
    notebook = folder / "01-attention.ipynb"
    notebook.write_text("{}")
    monkeypatch.chdir(folder)  # Jupyter starts the kernel in the notebook's folder
    monkeypatch.setenv("JPY_SESSION_NAME", "notebooks/01-attention.ipynb")  # relative to the server's folder
    assert this_notebook() == folder / "01-attention.ipynb"
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert this_notebook({"__vsc_ipynb_file__": str(notebook)}) == notebook
    assert this_notebook({}) is None
