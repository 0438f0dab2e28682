"""Rules every graded suite keeps, checked on the test files themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.curriculum import BY_ID

TESTS = Path(__file__).resolve().parents[1]
PUBLIC = sorted((TESTS / "public").glob("test_*.py"))
GRADED = PUBLIC + sorted((TESTS / "hidden").glob("test_*.py"))


def _test_functions(path: Path) -> list[ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.name)
def test_public_suites_never_need_the_reference_solutions(path: Path):
    # Students get tests/public without solutions/: a public test must stand on known answers.
    tree = ast.parse(path.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module or "" for n in imports if isinstance(n, ast.ImportFrom)]
    assert not [m for m in modules if m.split(".")[0] == "solutions"], f"{path.name} imports solutions"
    users = [f.name for f in _test_functions(path) if "ref" in [a.arg for a in f.args.args]]
    assert not users, f"{path.name}: {users} take the `ref` fixture"


@pytest.mark.parametrize("path", GRADED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_graded_suites_belong_to_an_exercise_and_every_test_has_points(path: Path):
    assert path.stem.removeprefix("test_") in BY_ID, f"{path.name} names no exercise of the curriculum"
    unweighted = [
        f.name for f in _test_functions(path)
        if not any("points" in ast.unparse(d) for d in f.decorator_list)
    ]
    assert not unweighted, f"{path.name}: {unweighted} have no @pytest.mark.points(n)"


@pytest.mark.parametrize("path", GRADED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_graded_assert_explains_itself(path: Path):
    # Graded suites run with --assert=plain: a bare `assert` would tell the student nothing.
    bare = [node.lineno for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Assert)
            and node.msg is None]
    assert not bare, f"{path.name}: asserts without a message on lines {bare}"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, list[list[str]], list[str]]]:
    """The graded suites collected as the grader collects them: each test's node id, `hint_after` marks and the
    contract names it exercises (`grader.judge.reach.tested_names`). One collection, for the tests below."""
    import json
    import os
    import subprocess
    import sys

    tmp_path = tmp_path_factory.mktemp("collected")
    (tmp_path / "kit_dump_marks.py").write_text(
        "import json, os\n"
        "from grader.judge.reach import tested_names\n"
        "def pytest_collection_finish(session):\n"
        "    found = [(item.nodeid, [list(m.args) for m in item.iter_markers('hint_after')], tested_names(item))\n"
        "             for item in session.items]\n"
        "    with open(os.environ['KIT_MARKS_OUT'], 'w') as out:\n"
        "        json.dump(found, out)\n")
    dump = tmp_path / "marks.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS.parent)]), "KIT_MARKS_OUT": str(dump),
           "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "grader.judge.plugin",
                          "-p", "kit_dump_marks", "-p", "no:cacheprovider", "-o", "addopts=", "--import-mode=importlib",
                          str(TESTS / "public"), str(TESTS / "hidden")],
                         cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=120)
    assert dump.is_file(), run.stdout[-2000:] + run.stderr[-2000:]
    return [tuple(item) for item in json.loads(dump.read_text())]


def test_every_hint_after_names_a_test_of_its_own_file(collected):
    """`hint_after` keeps a hint only while the tests it names pass: a misspelt name matches nothing, and the hint it
    guards would show whatever fails."""
    names: dict[str, set[str]] = {}
    for nodeid, _, _ in collected:
        file, _, name = nodeid.partition("::")
        names.setdefault(file, set()).update({name, name.split("[")[0]})
    marked = [(nodeid, target) for nodeid, marks, _ in collected for args in marks for target in args]
    assert len(marked) > 50, f"only {len(marked)} hint_after names found: the suites' marks were not read"
    for nodeid, target in marked:
        file, _, name = nodeid.partition("::")
        assert target in names[file] and target != name, f"{nodeid}: hint_after({target!r}) names no other test there"


def test_every_test_of_a_prerequisite_names_what_it_exercises(collected):
    """Scoring says "blocked by masking" only where a failing test of masking exercises a name the exercise's code
    uses: each test of an exercise others build on must map to at least one of its contract names (`impl.<exercise>.
    <name>`, directly or in a helper of its file), else its failure could never be evidence, or be read wrong."""
    built_on = {need for exercise in BY_ID.values() for need in exercise.needs}
    unmapped = []
    for nodeid, _, names in collected:
        exercise = Path(nodeid.split("::")[0]).stem.removeprefix("test_")
        if exercise in built_on and not set(names) & set(BY_ID[exercise].names):
            unmapped.append(nodeid)
    assert len(collected) > 200, f"only {len(collected)} tests collected"
    assert not unmapped, f"{len(unmapped)} tests map to no contract name of their exercise: {unmapped[:10]}"
    by_id = {nodeid.split("::")[1]: names for nodeid, _, names in collected}
    assert by_id["test_causal_mask_is_zero_below_and_minus_infinity_above"] == ["causal_mask"]
    assert by_id["test_causal_average_keeps_the_shape"] == ["causal_average"]


def test_a_run_grades_one_track_chosen_by_its_exercises_its_option_or_the_kits_default(tmp_path: Path):
    """select(): no exercise and no track is the kit's default track (the first, or a release's own); exercises named
    choose theirs; --track names one; exercises of two tracks, or of another track than --track, are refused."""
    from grader.curriculum import EXERCISES, FIRST, MODERN, RELEASE_TRACK
    from grader.grade.selection import UsageError, select

    root = tmp_path / "kit"
    (root / "tests" / "public").mkdir(parents=True)
    for exercise in EXERCISES:
        (root / "tests" / "public" / f"test_{exercise.id}.py").write_text("")
    assert select(None, "public", root=root).exercises == FIRST.ids
    assert select(["rope"], "public", root=root).track == "modern"
    assert select(None, "public", root=root, track="modern").exercises == MODERN.ids
    kv = select(["kv_cache"], "public", root=root)
    assert kv.exercises == ("kv_cache",) and kv.prerequisites == ("rope",), kv  # its prerequisite's tests run too
    for exercises, track in ((["rope", "attention"], None), (["attention"], "modern")):
        with pytest.raises(UsageError, match="grade one track at a time"):
            select(exercises, "public", root=root, track=track)
    with pytest.raises(UsageError, match="unknown track 'ancient'"):
        select(None, "public", root=root, track="ancient")
    (root / RELEASE_TRACK).parent.mkdir(parents=True)
    (root / RELEASE_TRACK).write_text("modern\n")  # what `grader release --track modern` writes
    assert select(None, "public", root=root).exercises == MODERN.ids
    assert select(["attention"], "public", root=root).exercises == ("attention",)
