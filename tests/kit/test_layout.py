"""The grader's layout keeps its promises: the sandbox side is one folder that imports nothing it should
not, the trusted side uses only its shared libraries, and a word names one thing.

grader/inside/ is copied into every sandbox whole (`intake.submission.stage_worker`), so what it may
import is what the sandbox offers: the standard library, torch, safetensors, the seccomp and Landlock
bindings, and itself. Trusted code runs beside the tests and the solutions; from the sandbox side it
may use only grader/inside/shared/, the plain libraries both sides run, never the zygote, the worker
or the confinement that a submission runs next to.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

import pytest

from grader.intake.submission import stage_worker

GRADER = Path(__file__).resolve().parents[2] / "grader"
INSIDE = GRADER / "inside"
SANDBOX_PACKAGES = {"torch", "safetensors", "seccomp", "pyseccomp", "landlock"}
MAX_MODULE_LINES = 350


def _modules(folder: Path) -> list[Path]:
    """The grader's modules: not the Chinese stubs kept in its locale/ folder, which are translations, not code."""
    return sorted(p for p in folder.rglob("*.py")
                  if "__pycache__" not in p.parts and "locale" not in p.relative_to(folder).parts)


def _package_of(path: Path) -> list[str]:
    return ["grader", *path.parent.relative_to(GRADER).parts]


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, anywhere in it (functions included), as absolute dotted names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(path)[: len(_package_of(path)) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found += [f"{module}.{alias.name}" if module.startswith("grader") else module for alias in node.names]
    return found


def _is_module_or_package(dotted: str) -> bool:
    path = GRADER.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _grader_module(dotted: str) -> str:
    """`grader.x.y.name` to the module it comes from (a name imported from a module counts as that module)."""
    return dotted if _is_module_or_package(dotted) else dotted.rpartition(".")[0]


@pytest.mark.parametrize("path", _modules(INSIDE), ids=lambda p: str(p.relative_to(GRADER)))
def test_the_sandbox_side_imports_only_what_the_sandbox_offers(path: Path):
    for imported in _imports(path):
        top = imported.split(".")[0]
        if top == "grader":
            assert _grader_module(imported).startswith("grader.inside"), f"{path.name} imports {imported}"
        else:
            assert top in sys.stdlib_module_names or top in SANDBOX_PACKAGES, f"{path.name} imports {imported}"


@pytest.mark.parametrize("path", [p for p in _modules(GRADER) if INSIDE not in p.parents],
                         ids=lambda p: str(p.relative_to(GRADER)))
def test_trusted_code_uses_only_the_shared_libraries_of_the_sandbox_side(path: Path):
    for imported in _imports(path):
        module = _grader_module(imported) if imported.startswith("grader") else imported
        if module.startswith("grader.inside"):
            assert module in ("grader.inside", "grader.inside.shared") or module.startswith("grader.inside.shared."), (
                f"{path.relative_to(GRADER)} imports {imported}: trusted code may use grader/inside/shared/ only"
            )


def test_the_staged_worker_is_the_whole_sandbox_side(tmp_path: Path):
    stage_worker(tmp_path)
    staged = {p.relative_to(tmp_path / "gradeworker") for p in _modules(tmp_path / "gradeworker")}
    assert staged == {p.relative_to(INSIDE) for p in _modules(INSIDE)}


def test_no_two_classes_share_a_name():
    names = Counter(node.name for path in _modules(GRADER) for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ClassDef))
    assert not [name for name, count in names.items() if count > 1]


def test_no_module_is_longer_than_a_reader_can_hold():
    lines = {str(p.relative_to(GRADER)): len(p.read_text().splitlines()) for p in _modules(GRADER)}
    long = {name: n for name, n in lines.items() if n > MAX_MODULE_LINES}
    assert not long, f"split these modules (over {MAX_MODULE_LINES} lines): {long}"
