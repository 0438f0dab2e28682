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
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from grader.grade.selection import kit_root
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
# A release may not be written inside the folders it is built from.
SOURCE_FOLDERS = ("exercises", "solutions", "grader", "tests", "docs", "benchmarks", ".ci", ".git")


def build(out: Path, *, autograder: bool = False, language: str = "en", root: Path | None = None) -> list[Path]:
    """Copy the student distribution (or the autograder bundle) into `out`, its stubs, notebooks and student README in
    `language`; returns the files written."""
    root = (root or kit_root()).resolve()
    out = out.resolve()
    bundle = AUTOGRADER if autograder else STUDENT
    if language not in LANGUAGES:
        raise ReleaseError(tr("there is no release in {language}: choose one of {choices}", language=repr(language),
                              choices=", ".join(LANGUAGES)))
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
    # The student notebooks are built from the stubs being shipped, never copied: they cannot drift from them.
    written = notebooks.write_all(out / STUBS, out / notebooks.FOLDER, language=language)
    return sorted([*plan, RELEASE_LANGUAGE, *(path.relative_to(out) for path in written)])


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


def _is_twin(path: Path) -> bool:
    """Whether `path` (relative to the kit root) is a translated stub, which ships only in place of its English one."""
    return path.is_relative_to(TWINS) and path.relative_to(TWINS).parts[1:2] == ("exercises",)
