"""`variants` builds the alternative exercise files the kit judges itself on: known mistakes and correct variants.

A known mistake is the reference `solutions/<exercise>.py` with a few exact edits, listed with its
diagnosis in `solutions/mistakes/<exercise>.py`. A correct variant is either a whole file,
`tests/kit/submissions/<exercise>/correct/<name>.py`, or edits of the reference listed in
`tests/kit/submissions/<exercise>/correct.py`. Held-out mistakes, realistic slips kept out of the catalogue so
that the diagnosis is tried on mistakes it was not built from, are edits listed in
`tests/kit/submissions/<exercise>/held_out.py`. Each edit `(old, new)` replaces text that occurs exactly
once where it is applied, in order; the built file's docstring is the variant's one-sentence `why`.
Only the catalogue's data modules are imported here; the files built from them are not.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

Edit = tuple[str, str]


@dataclass(frozen=True)
class Variant:
    """A whole alternative `<exercise>.py`: a known mistake (with its diagnosis) or a correct variant."""

    exercise: str
    name: str
    source: str  # the whole alternative <exercise>.py, edits applied
    diagnosis: str | None  # a known mistake's DIAGNOSIS; None for a correct variant
    origin: Path  # the file that describes it
    edits: tuple[Edit, ...] = ()  # the edits of the reference it was built from; () for a whole file


@dataclass(frozen=True)
class EditedVersion:
    """How a data file describes one variant: the reference with `edits`, its docstring `why`."""

    name: str
    why: str
    edits: tuple[Edit, ...]
    diagnosis: str | None = None


class EditDoesNotApply(ValueError):
    """An edit's `old` text does not occur exactly once where it is applied: the reference has moved on."""

    def __init__(self, variant: str, edit: Edit, matches: int) -> None:
        old, new = edit
        super().__init__(f"{variant}: the edit {old!r} -> {new!r} must match the reference exactly once, "
                         f"it matches {matches} times")
        self.variant, self.edit, self.matches = variant, edit, matches


def solutions_folder() -> Path | None:
    """The installed `solutions` package's folder, or None where the reference solutions are not installed."""
    spec = importlib.util.find_spec("solutions")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def apply(reference: str, edits: Sequence[Edit], *, variant: str) -> str:
    """`reference` with each `(old, new)` applied in order; EditDoesNotApply unless `old` occurs exactly once."""
    text = reference
    for old, new in edits:
        matches = text.count(old) if old else 0
        if matches != 1:
            raise EditDoesNotApply(variant, (old, new), matches)
        text = text.replace(old, new, 1)
    return text


def with_docstring(source: str, why: str) -> str:
    """`source` with its module docstring (added if it has none) replaced by `why`."""
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    first = body[0] if body else None
    docstring = f'"""{why}"""\n'
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        end = first.end_lineno or first.lineno
        return "".join([*lines[: first.lineno - 1], docstring, *lines[end:]])
    return docstring + "\n" + source


def build(exercise: str, version: EditedVersion, *, reference: str, origin: Path) -> Variant:
    """The Variant that `version` describes, its source built from the reference's text."""
    source = apply(reference, version.edits, variant=f"{exercise}/{version.name}")
    return Variant(exercise, version.name, with_docstring(source, version.why), version.diagnosis, origin,
                   version.edits)


def mistakes(exercise: str) -> tuple[Variant, ...]:
    """The known mistakes of `exercise`, in catalogue order; () where the solutions package is not installed."""
    folder = solutions_folder()
    if folder is None or not (folder / "mistakes" / f"{exercise}.py").is_file():
        return ()
    catalogue = importlib.import_module(f"solutions.mistakes.{exercise}")
    reference = (folder / f"{exercise}.py").read_text(encoding="utf-8")
    origin = folder / "mistakes" / f"{exercise}.py"
    return tuple(
        build(exercise, EditedVersion(m.name, m.why, tuple(m.edits), m.diagnosis), reference=reference, origin=origin)
        for m in catalogue.MISTAKES
    )


class NotIndependent(ValueError):
    """Two mistakes whose edits touch the same lines of the reference, or do not compose into code that parses."""


def combined(first: Variant, second: Variant) -> Variant:
    """Both known mistakes of one exercise in one file, `first`'s edits then `second`'s, named `first+second`:
    two independent slips a student made at once. NotIndependent where their diffs against the reference (difflib,
    by line) overlap or touch, or where the result does not apply or parse."""
    folder = solutions_folder()
    if folder is None or first.exercise != second.exercise or not first.edits or not second.edits:
        raise ValueError(f"{first.exercise}/{first.name} and {second.exercise}/{second.name} are not catalogued "
                         "mistakes of one exercise")
    reference = (folder / f"{first.exercise}.py").read_text(encoding="utf-8")
    name = f"{first.name}+{second.name}"
    lines = [_changed_lines(reference, apply(reference, v.edits, variant=v.name)) for v in (first, second)]
    if any(max(a[0], b[0]) < min(a[1], b[1]) for a in lines[0] for b in lines[1]):
        raise NotIndependent(f"{first.exercise}/{name}: the two mistakes edit the same lines")
    try:
        source = apply(reference, (*first.edits, *second.edits), variant=name)
        ast.parse(source)
    except (EditDoesNotApply, SyntaxError) as error:
        raise NotIndependent(f"{first.exercise}/{name}: the two mistakes do not compose ({error})") from None
    why = f"{_docstring(first)} {_docstring(second)}"
    return Variant(first.exercise, name, with_docstring(source, why), None, first.origin,
                   (*first.edits, *second.edits))


def _changed_lines(before: str, after: str) -> list[tuple[float, float]]:
    """The lines of `before` that `after` replaces or deletes, by difflib, as (first, end); an insertion takes a
    quarter of a line either side of where it goes, so that two at one place, or one inside a change, overlap."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    return [(i1, i2) if i2 > i1 else (i1 - 0.25, i1 + 0.25)
            for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal"]


def _docstring(variant: Variant) -> str:
    return (ast.get_docstring(ast.parse(variant.source)) or "").strip()


def submissions_folder() -> Path | None:
    """tests/kit/submissions/ next to the installed solutions; None where either is absent (a release)."""
    folder = solutions_folder()
    submissions = folder.parent / "tests" / "kit" / "submissions" if folder is not None else None
    return submissions if submissions is not None and submissions.is_dir() else None


def correct_variants(exercise: str) -> tuple[Variant, ...]:
    """The correct variants of `exercise`, by name: edited ones and whole files; () without tests/kit."""
    submissions = submissions_folder()
    if submissions is None:
        return ()
    found = list(_edited(exercise, "correct.py"))
    for path in sorted((submissions / exercise / "correct").glob("*.py")):
        found.append(Variant(exercise, path.stem, path.read_text(encoding="utf-8"), None, path))
    names = [v.name for v in found]
    if len(set(names)) != len(names):
        raise ValueError(f"{exercise}: two correct variants share a name in {sorted(names)}")
    return tuple(sorted(found, key=lambda v: v.name))


def held_out_mistakes(exercise: str) -> tuple[Variant, ...]:
    """Realistic mistakes of `exercise` kept out of the catalogue (`tests/kit/submissions/<exercise>/held_out.py`):
    they must lose points and be told no known mistake's name. () without tests/kit."""
    return tuple(sorted(_edited(exercise, "held_out.py"), key=lambda v: v.name))


def _edited(exercise: str, data_file: str) -> tuple[Variant, ...]:
    """The variants a kit data file lists as edits of the reference, with no diagnosis of their own."""
    submissions, folder = submissions_folder(), solutions_folder()
    if submissions is None or folder is None or not (submissions / exercise / data_file).is_file():
        return ()
    data = submissions / exercise / data_file
    reference = (folder / f"{exercise}.py").read_text(encoding="utf-8")
    return tuple(build(exercise, version, reference=reference, origin=data) for version in _edited_versions(data))


def _edited_versions(data: Path) -> tuple[EditedVersion, ...]:
    """The `VARIANTS` tuple of a kit's correct.py data file (the kit's own, trusted: it is imported)."""
    spec = importlib.util.spec_from_file_location(f"kit_{data.stem}_variants_{data.parent.name}", data)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {data}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.VARIANTS)


def write(variant: Variant, folder: Path) -> Path:
    """Write the variant as `folder/<exercise>.py` (the folder made if need be), for a test that grades it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{variant.exercise}.py"
    path.write_text(variant.source, encoding="utf-8")
    return path
