"""`catalogue` loads the known mistakes of `solutions/mistakes/`, and lends the reference with one exercise swapped.

A mistake is a whole wrong `<exercise>.py`, written as a student would write it, with a module-level
`DIAGNOSIS` sentence. Where the reference solutions are not installed (the student release) the
catalogue is empty.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from grader.inside.shared import probes as kit_probes


@dataclass(frozen=True)
class Mistake:
    """One known-wrong implementation of an exercise, and what to tell a student who made it."""

    exercise: str
    name: str
    diagnosis: str
    module: types.ModuleType


def mistakes_folder() -> Path | None:
    """solutions/mistakes/, or None where the reference solutions are not installed."""
    spec = importlib.util.find_spec("solutions")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "mistakes"
    return folder if folder.is_dir() else None


def load_variant(path: Path, *, exercise: str) -> types.ModuleType:
    """Import a whole alternative `<exercise>.py` in this process, its relative imports bound to solutions/.

    Variants are written as student files (`from .config import ModelArgs`); loaded as a module of the
    `solutions` package, they build on the reference for every other exercise.
    """
    importlib.import_module("solutions")
    name = f"solutions._variant_{exercise}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "solutions"
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def diagnosis_text(path: Path) -> str:
    """The file's module-level DIAGNOSIS string, read without running the file."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DIAGNOSIS"]:
            value = ast.literal_eval(node.value)
            if isinstance(value, str) and value.strip():
                return value.strip()
    raise ValueError(f"{path} has no DIAGNOSIS = '...' string")


@cache
def catalogue(exercise: str) -> tuple[Mistake, ...]:
    """The known mistakes of `exercise`, loaded, in file-name order; () where there is no catalogue."""
    folder = mistakes_folder()
    if folder is None:
        return ()
    return tuple(
        Mistake(exercise, path.stem, diagnosis_text(path), load_variant(path, exercise=exercise))
        for path in sorted((folder / exercise).glob("*.py"))
    )


class Library:
    """The kit's modules by name, as `ref` gives them: solutions/, with one exercise swapped for a variant."""

    def __init__(self, swapped: dict[str, types.ModuleType] | None = None) -> None:
        self._swapped = swapped or {}

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._swapped:
            return self._swapped[name]
        if name == "torch":
            return torch
        if name == "probes":
            return kit_probes
        return importlib.import_module(f"solutions.{name}")


REFERENCE = Library()
