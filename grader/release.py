"""`release` builds the folders the kit ships: the student distribution and the autograder bundle.

The student distribution holds what a student needs to work and to grade themselves on the public
tests; the autograder bundle adds the reference solutions and the hidden tests, for Gradescope or
an instructor's machine. Everything is copied from a list: whatever is not named never ships. The
student notebooks (notebooks/, one per exercise) are generated from the stubs that ship.

Both carry a GitHub Actions workflow that grades the repository they are pushed to; the autograder
bundle also carries Gradescope's `setup.sh` and `run_autograder` at its top. The three are kept as
files in `grader/recipes/` and copied as they are.

A release is written in one language for its students (`grader release --lang zh`; English unless asked,
whatever the language of the terminal that builds it). In another language than English its stubs are the
translated twins kept in `grader/locale/<language>/exercises/` (the same code, with the docstrings, comments
and messages translated: a kit test holds them to the English ones, so they grade alike), its notebooks are
built from them, and the student README is `docs/student-README.<language>.md`. The twins are sources of a
release, not part of the grader: they ship only as the release's `exercises/`.

A release never ships answers: it is refused, before anything is written, while a stub of the kit holds code that is
not the stub's (an instructor who filled exercises/ to try the grader, in either language). Every function of an
exercise file is the stub's body, `raise NotImplementedError(...)` (after `super().__init__()` in an `nn.Module`'s
`__init__`), and each stub holds the same code as its twins, their prose aside: a filled stub differs from its twin,
a stub filled in every language does not keep the stub's body. The notebooks are built from the stubs that ship, so
that the kit's own notebooks/, filled or not, never reach a release.
"""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.curriculum import BY_ID, FIRST, RELEASE_TRACK, SUBMISSION_FILES, TRACK_BY_ID, TRACKS, with_prerequisites
from grader.intake.stubs import SHIPPED
from grader.kit import kit_root
from grader.lang import LANGUAGES, RELEASE_LANGUAGE, tr
from grader.student import notebooks


class ReleaseError(ValueError):
    """A release cannot be built where or from what was asked; the message says what to do."""


@dataclass(frozen=True)
class Bundle:
    files: tuple[str, ...]  # single files, relative to the kit root
    packages: tuple[str, ...]  # folders whose *.py files are copied, recursively
    readme: str  # the file that becomes README.md
    recipes: tuple[tuple[str, str], ...]  # (where it goes, which file of grader/recipes/)
    secret: tuple[str, ...] = ()  # folders of which nothing may ship, whatever the lists above say
    documents: tuple[str, ...] = ()  # folders whose pages (*.md) and their pictures (*.png) are copied
    translated_readme: bool = False  # the README is the students': a release in another language has it translated


RECIPES = Path("grader/recipes")  # shipped whole in both bundles, so that the grader package is complete
STUBS = Path("exercises")
TWINS = Path("grader/locale")  # TWINS/<language>/exercises/ holds the stubs of exercises/ in that language
# The translations of what the grader prints and of the public suite's feedback; the hidden suite's and the diagnoses'
# ship only with the autograder bundle, as what they translate does.
CATALOGS = ("grader/locale/zh/LC_MESSAGES/grader.po", "tests/public/locale/zh/LC_MESSAGES/public.po")
SECRET_CATALOGS = ("tests/hidden/locale/zh/LC_MESSAGES/hidden.po",
                   "solutions/mistakes/locale/zh/LC_MESSAGES/mistakes.po")
WORKFLOW = (".github/workflows/grade.yml", "grade.yml")
GRADESCOPE = (("setup.sh", "setup.sh"), ("run_autograder", "run_autograder"))  # written with mode 0755
EXECUTABLE = {Path(target) for target, _ in GRADESCOPE}

STUDENT = Bundle(
    files=("pyproject.toml", ".gitignore", "tests/conftest.py", *CATALOGS,
           *(str(RECIPES / name) for _, name in (WORKFLOW, *GRADESCOPE))),
    packages=("exercises", "grader", "tests/public"),
    readme="docs/student-README.md",
    recipes=(WORKFLOW,),
    # solutions/mistakes/ holds the catalogue of known mistakes: near-solutions, one slip each.
    secret=("solutions", "solutions/mistakes", "tests/hidden", "tests/kit"),
    translated_readme=True,
)
# The kit's README links the docs/ pages: they ship with it, so that none of its links is dead.
AUTOGRADER = Bundle((*STUDENT.files, *SECRET_CATALOGS), (*STUDENT.packages, "solutions", "tests/hidden"), "README.md",
                    (WORKFLOW, *GRADESCOPE), documents=("docs",))
# Where each exercise has a file of its own (`<id>.py`, `test_<id>.py`): a release ships those of its track only.
EXERCISE_FOLDERS = (STUBS, Path("solutions"), Path("solutions/mistakes"), Path("tests/public"), Path("tests/hidden"))
# A release may not be written inside the folders it is built from.
SOURCE_FOLDERS = ("exercises", "solutions", "grader", "tests", "docs", "benchmarks", ".ci", ".git")


def build(out: Path, *, autograder: bool = False, language: str = "en", root: Path | None = None,
          track: str = FIRST.id) -> list[Path]:
    """Copy the student distribution (or the autograder bundle) of `track` into `out`, its stubs, notebooks and student
    README in `language`; returns the files written."""
    root = (root or kit_root()).resolve()
    out = out.resolve()
    bundle = AUTOGRADER if autograder else STUDENT
    if language not in LANGUAGES:
        raise ReleaseError(tr("there is no release in {language}: choose one of {choices}", language=repr(language),
                              choices=", ".join(LANGUAGES)))
    if track not in TRACK_BY_ID or not TRACK_BY_ID[track].exercises:
        raise ReleaseError(tr("there is no track {track} to release: choose one of {choices}", track=repr(track),
                              choices=", ".join(t.id for t in TRACKS if t.exercises)))
    for folder in SOURCE_FOLDERS:
        if out.is_relative_to(root / folder):
            raise ReleaseError(tr("{out} is inside the kit's {folder}/ folder: build the release somewhere else",
                                  out=str(out), folder=folder))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(tr("{out} already exists and is not empty: choose a new folder or empty it first",
                              out=str(out)))
    plan: dict[Path, Path] = {Path("README.md"): root / _readme(bundle, language)}
    plan.update({Path(name): root / name for name in bundle.files})
    plan.update({Path(target): root / RECIPES / name for target, name in bundle.recipes})
    for package in bundle.packages:
        if not (root / package).is_dir():
            raise ReleaseError(tr("{path} is missing: build from a full checkout of the kit", path=str(root / package)))
        for source in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in source.parts and not _is_twin(source.relative_to(root)):
                plan[source.relative_to(root)] = source
    for target in [target for target in plan if _of_another_track(target, track)]:
        del plan[target]
    if language != "en":
        for stub in [target for target in plan if target.parent == STUBS]:
            plan[stub] = root / TWINS / language / stub
    for folder in bundle.documents:
        for source in sorted([*(root / folder).glob("*.md"), *(root / folder).glob("*.png")]):
            plan[source.relative_to(root)] = source
    leaked = [str(target) for target in plan if any(target.is_relative_to(folder) for folder in bundle.secret)]
    if leaked:
        raise ReleaseError(tr("{path} is secret and must not ship in this release: fix the bundle's lists",
                              path=leaked[0]))
    _refuse_answers(root, [target for target in plan if target.is_relative_to(STUBS)])
    missing = [str(source) for source in plan.values() if not source.is_file()]
    if missing:
        raise ReleaseError(tr("{path} is missing: build from a full checkout of the kit", path=missing[0]))
    for target, source in plan.items():
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, out / target)
        if target in EXECUTABLE:
            (out / target).chmod(0o755)
    if language != "en":
        for target, name in bundle.recipes:
            if name in LANGUAGE_LINES:
                _grade_in(out / target, language)
    # The release speaks its language wherever it runs, whatever the locale there (GRADER_LANG and --lang still win).
    (out / RELEASE_LANGUAGE).parent.mkdir(parents=True, exist_ok=True)
    (out / RELEASE_LANGUAGE).write_text(language + "\n", encoding="utf-8")
    (out / RELEASE_TRACK).write_text(track + "\n", encoding="utf-8")  # what its commands grade when told no track
    # What an untouched stub is, once exercises/ is the student's (grader.intake.stubs).
    shipped = {target.name: (out / target).read_text(encoding="utf-8") for target in plan if target.parent == STUBS}
    (out / SHIPPED).write_text(json.dumps(shipped, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                               encoding="utf-8", newline="\n")
    # The student notebooks are built from the stubs being shipped, never copied: they cannot drift from them.
    written = notebooks.write_all(out / STUBS, out / notebooks.FOLDER, language=language)
    return sorted([*plan, RELEASE_LANGUAGE, RELEASE_TRACK, SHIPPED, *(path.relative_to(out) for path in written)])


# Where each recipe sets the grader's environment: a release in another language grades in it too, on Gradescope and
# in Actions alike, unless GRADER_LANG says otherwise there.
LANGUAGE_LINES = {
    "run_autograder": ("export OMP_NUM_THREADS=1 NO_COLOR=1\n",
                       'export OMP_NUM_THREADS=1 NO_COLOR=1 GRADER_LANG="${{GRADER_LANG:-{language}}}"\n'),
    "grade.yml": ('      NO_COLOR: "1"\n', '      NO_COLOR: "1"\n      GRADER_LANG: "{language}"\n'),
}


def _grade_in(recipe: Path, language: str) -> None:
    """Have the copied `recipe` grade in `language`."""
    anchor, line = LANGUAGE_LINES[recipe.name]
    text = recipe.read_text(encoding="utf-8")
    if text.count(anchor) != 1:
        raise ReleaseError(f"{recipe.name} no longer has the line a release in {language} extends: fix LANGUAGE_LINES")
    # newline="\n": a release built on Windows must not give Gradescope's shell script and Actions' workflow CRLFs.
    recipe.write_text(text.replace(anchor, line.format(language=language)), encoding="utf-8", newline="\n")


def _readme(bundle: Bundle, language: str) -> str:
    """The file that becomes the release's README.md: `docs/student-README.zh.md` for a Chinese student release."""
    if language == "en" or not bundle.translated_readme:
        return bundle.readme
    readme = Path(bundle.readme)
    return str(readme.with_name(f"{readme.stem}.{language}{readme.suffix}"))


def _of_another_track(path: Path, track: str) -> bool:
    """Whether `path` (relative to the kit) is an exercise's stub, solution, known mistakes or test file that a release
    of `track` leaves out: it ships the track's exercises and those they build on."""
    if path.suffix != ".py" or path.parent not in EXERCISE_FOLDERS:
        return False
    exercise = path.stem.removeprefix("test_") if path.parent.parent == Path("tests") else path.stem
    return exercise in BY_ID and exercise not in {shipped.id for shipped in with_prerequisites(TRACK_BY_ID[track])}


def _is_twin(path: Path) -> bool:
    """Whether `path` (relative to the kit root) is a translated stub, which ships only in place of its English one."""
    return path.is_relative_to(TWINS) and path.relative_to(TWINS).parts[1:2] == ("exercises",)


Where = str | int  # where a file stops being its stub: the qualified name of a function or class, else a line
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _refuse_answers(root: Path, stubs: list[Path]) -> None:
    """Raise ReleaseError, naming the file and where, if a stub a release would ship (`stubs`, relative to the kit
    root) holds code that is not the stub's, in English or in any twin, or is not one of the kit's stubs at all."""
    twins = sorted((root / TWINS).glob("*/exercises"))
    for stub in sorted(stubs):
        if stub.parent != STUBS or not all((twin / stub.name).is_file() for twin in twins):
            raise ReleaseError(tr("{path} is not one of the kit's stubs: a release ships only those; move it out of "
                                  "{folder}/", path=stub.as_posix(), folder=STUBS.as_posix()))
        copies = [stub, *((twin / stub.name).relative_to(root) for twin in twins)]
        code = {copy: _code(root, copy) for copy in copies}
        if stub.name in SUBMISSION_FILES:
            for copy in copies:
                _refuse(copy, next(_filled(code[copy]), None))
        for twin in copies[1:]:
            _refuse(stub, _first_difference(code[stub], code[twin]))


def _refuse(path: Path, where: Where | None) -> None:
    if isinstance(where, str):
        raise ReleaseError(tr("{path} holds code that is not the kit's stub, in `{name}`: a release never ships "
                              "answers; put the stub back (e.g. `git checkout -- {path}`) and release again",
                              path=path.as_posix(), name=where))
    if where is not None:
        raise ReleaseError(tr("{path} holds code that is not the kit's stub, at line {line}: a release never ships "
                              "answers; put the stub back (e.g. `git checkout -- {path}`) and release again",
                              path=path.as_posix(), line=where))


def _code(root: Path, path: Path) -> list[ast.stmt]:
    """The statements of the file `path` with their prose blanked (docstrings, the messages of `raise
    NotImplementedError`): what is left is the code, the same in a stub and in its translated twin."""
    try:
        tree = ast.parse((root / path).read_bytes())
    except (SyntaxError, ValueError) as error:  # ValueError: a null byte
        _refuse(path, getattr(error, "lineno", None) or 1)
        raise  # not reached: _refuse raised
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, *DEFINITIONS)) and ast.get_docstring(node) is not None:
            node.body[0].value.value = ""  # type: ignore[attr-defined]
        if _is_unwritten(node):
            for part in ast.walk(node):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    part.value = ""
    return tree.body


def _filled(body: list[ast.stmt], prefix: str = "") -> Iterator[str]:
    """The qualified names of the functions in `body` whose own code is not a stub's, in the order they come."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from _filled(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            statements = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if not (statements and _is_unwritten(statements[-1])
                    and all(_calls_super_init(statement) for statement in statements[:-1])):
                yield prefix + node.name


def _is_unwritten(node: ast.AST) -> bool:
    """Whether `node` is a stub's `raise NotImplementedError(...)`."""
    if not isinstance(node, ast.Raise):
        return False
    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def _calls_super_init(node: ast.stmt) -> bool:
    """Whether `node` is `super().__init__(...)`, which a stub's `__init__` calls before it raises."""
    call = node.value if isinstance(node, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
            and isinstance(call.func.value, ast.Call) and getattr(call.func.value.func, "id", "") == "super")


def _first_difference(mine: list[ast.stmt], theirs: list[ast.stmt], prefix: str = "") -> Where | None:
    """Where the code `mine` first differs from `theirs`: the function or class it differs in, else the line."""
    for index, node in enumerate(mine):
        other = theirs[index] if index < len(theirs) else None
        if other is not None and ast.dump(node) == ast.dump(other):
            continue
        if isinstance(node, ast.ClassDef) and isinstance(other, ast.ClassDef) and node.name == other.name:
            inner = _first_difference(node.body, other.body, f"{prefix}{node.name}.")
            if inner is not None:
                return inner
        return prefix + node.name if isinstance(node, DEFINITIONS) else node.lineno
    if len(theirs) > len(mine):  # a statement of the stub is gone
        gone = theirs[len(mine)]
        if isinstance(gone, DEFINITIONS):
            return prefix + gone.name
        return (mine[-1].end_lineno or mine[-1].lineno) if mine else 1
    return None
