"""`catalogue` loads the known mistakes of `solutions/mistakes/`, and lends the reference with one exercise swapped.

A mistake is a whole wrong `<exercise>.py`, as a student would write it, built from the reference by
the edits `solutions/mistakes/<exercise>.py` lists (`grader.judge.variants`), with the sentence to tell
a student who makes it. Where the reference solutions are not installed (the student release) the
catalogue is empty.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from grader.inside.shared import probes as kit_probes
from grader.judge import variants
from grader.judge.variants import Variant


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


def load_variant(variant: Variant) -> types.ModuleType:
    """Import a whole alternative `<exercise>.py` in this process, its relative imports bound to solutions/.

    Variants are written as student files (`from .config import ModelArgs`); loaded as a module of the
    `solutions` package, they build on the reference for every other exercise.
    """
    importlib.import_module("solutions")
    name = f"solutions._variant_{variant.exercise}_{variant.name}"
    module = types.ModuleType(name, None)
    module.__package__ = "solutions"
    module.__file__ = f"{variant.origin}:{variant.name}"  # where a traceback should send a reader
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        exec(compile(variant.source, module.__file__, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@cache
def catalogue(exercise: str) -> tuple[Mistake, ...]:
    """The known mistakes of `exercise`, loaded, by name; () where there is no catalogue."""
    return tuple(
        Mistake(exercise, variant.name, variant.diagnosis or "", load_variant(variant))
        for variant in sorted(variants.mistakes(exercise), key=lambda variant: variant.name)
    )


@cache
def combination(exercise: str, first: str, second: str) -> Mistake | None:
    """Two known mistakes of `exercise` made at once (`grader.judge.variants.combined`), loaded, named
    `first+second`; None where they are not independent (their edits overlap, or the result does not import)."""
    by_name = {variant.name: variant for variant in variants.mistakes(exercise)}
    try:
        variant = variants.combined(by_name[first], by_name[second])
        return Mistake(exercise, variant.name, "", load_variant(variant))
    except Exception:  # whatever stops the pair from importing makes it no pair
        return None


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
