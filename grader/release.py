"""`release` builds the folders the kit ships: the student distribution and the autograder bundle.

The student distribution holds what a student needs to work and to grade themselves on the public
tests; the autograder bundle adds the reference solutions and the hidden tests, for Gradescope or
an instructor's machine. Everything is copied from a list: whatever is not named never ships. The
student notebooks (notebooks/, one per exercise) are generated from the stubs that ship.

Both carry a GitHub Actions workflow that grades the repository they are pushed to; the autograder
bundle also carries Gradescope's `setup.sh` and `run_autograder` at its top. The three are kept as
files in `grader/recipes/` and copied as they are.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from grader.grade.selection import kit_root
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


RECIPES = Path("grader/recipes")  # shipped whole in both bundles, so that the grader package is complete
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
)
# The kit's README links the docs/ pages: they ship with it, so that none of its links is dead.
AUTOGRADER = Bundle((*STUDENT.files, *SECRET_CATALOGS), (*STUDENT.packages, "solutions", "tests/hidden"), "README.md",
                    (WORKFLOW, *GRADESCOPE), documents=("docs",))
# A release may not be written inside the folders it is built from.
SOURCE_FOLDERS = ("exercises", "solutions", "grader", "tests", "docs", "benchmarks", ".ci", ".git")


def build(out: Path, *, autograder: bool = False, root: Path | None = None) -> list[Path]:
    """Copy the student distribution (or the autograder bundle) into `out`; returns the files written."""
    root = (root or kit_root()).resolve()
    out = out.resolve()
    bundle = AUTOGRADER if autograder else STUDENT
    for folder in SOURCE_FOLDERS:
        if out.is_relative_to(root / folder):
            raise ReleaseError(f"{out} is inside the kit's {folder}/ folder: build the release somewhere else")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"{out} already exists and is not empty: choose a new folder or empty it first")
    plan: dict[Path, Path] = {Path("README.md"): root / bundle.readme}
    plan.update({Path(name): root / name for name in bundle.files})
    plan.update({Path(target): root / RECIPES / name for target, name in bundle.recipes})
    for package in bundle.packages:
        if not (root / package).is_dir():
            raise ReleaseError(f"{root / package} is missing: build from a full checkout of the kit")
        for source in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in source.parts:
                plan[source.relative_to(root)] = source
    for folder in bundle.documents:
        for source in sorted([*(root / folder).glob("*.md"), *(root / folder).glob("*.png")]):
            plan[source.relative_to(root)] = source
    leaked = [str(target) for target in plan if any(target.is_relative_to(folder) for folder in bundle.secret)]
    if leaked:
        raise ReleaseError(f"{leaked[0]} is secret and must not ship in this release: fix the bundle's lists")
    missing = [str(source) for source in plan.values() if not source.is_file()]
    if missing:
        raise ReleaseError(f"{missing[0]} is missing: build from a full checkout of the kit")
    for target, source in plan.items():
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, out / target)
        if target in EXECUTABLE:
            (out / target).chmod(0o755)
    # The student notebooks are built from the stubs being shipped, never copied: they cannot drift from them.
    written = notebooks.write_all(out / "exercises", out / notebooks.FOLDER)
    return sorted([*plan, *(path.relative_to(out) for path in written)])
