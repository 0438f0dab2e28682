"""The grader's layout keeps its promises: the sandbox side is one folder that imports nothing it should
not, the trusted side uses only its shared libraries, the layers import only downwards and no module
reaches itself through its imports, and a word names one thing.

grader/inside/ is copied into every sandbox whole (`intake.submission.stage_worker`), so what it may
import is what the sandbox offers: the standard library, torch, safetensors, the seccomp and Landlock
bindings, and itself. Trusted code runs beside the tests and the solutions; from the sandbox side it
may use only grader/inside/shared/, the plain libraries both sides run, never the zygote, the worker
or the confinement that a submission runs next to.

The layers (docs/architecture.md#layers) are read from the code, every import counted: at a module's
top, inside a function, under `if TYPE_CHECKING:`, `from package import module`, relative imports and
`importlib.import_module("grader....")`. A package's `__init__.py`, which Python runs before any of its
modules, counts only where a module imports the package by name: each imports its own modules (grader.batch
exports `run`), so counting it under all of them would make every package a cycle.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter, deque
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

from grader.intake.submission import stage_worker

GRADER = Path(__file__).resolve().parents[2] / "grader"
INSIDE = GRADER / "inside"
SANDBOX_PACKAGES = {"torch", "safetensors", "seccomp", "pyseccomp", "landlock"}
# The layers of grader/, the lowest first: a module imports from its own layer and those below it, never from one
# above. A layer is a subpackage (inside/ holds shared/) or a module of grader/'s own; "__init__" is grader/__init__.py,
# the notebook's face (`grader.check`), which no module imports. docs/architecture.md#layers says why each is where.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("inside",),  # the sandbox side: imports only itself (test_the_sandbox_side_imports_only_what_the_sandbox_offers)
    # what every layer says and knows
    ("kit", "settings", "lang", "sources", "text", "curriculum", "markers", "extract"),
    ("intake",),
    ("host",),
    ("judge", "testing"),
    ("grade",),
    ("view",),
    ("batch",),
    ("student",),
    ("release",),
    ("cli", "__main__"),
    ("__init__",),
)
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


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


def _module_name(path: Path, package: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, importer: str, is_package: bool) -> list[str]:
    """The dotted names `node` imports: an import statement's (a name from a module as `module.name`, which is the
    module itself where it is one), or the constant part of `importlib.import_module`'s argument."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = importer.split(".")
            base = base[: len(base) - node.level + 1] if is_package else base[: len(base) - node.level]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        return [f"{module}.{alias.name}" for alias in node.names]
    if (isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(node.func, "id", None))
            == "import_module"):
        argument = node.args[0]
        if isinstance(argument, ast.JoinedStr) and argument.values:  # f"grader.inside.shared.{name}"
            argument = argument.values[0]
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return [argument.value.rstrip(".")]
    return []


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Every module of `package` (a folder), and the modules of the package each one imports, anywhere in it, with
    the line of the first such import: {"grader.batch.schedule": {"grader.batch.jobs": 24, ...}, ...}."""
    paths = {_module_name(path, package): path for path in _modules(package)}
    graph: dict[str, dict[str, int]] = {}
    for name, path in paths.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for dotted in _imported(node, name, path.name == "__init__.py"):
                while dotted and dotted not in paths:  # `from module import name`: the module
                    dotted = dotted.rpartition(".")[0]
                if dotted and dotted != name:
                    edges.setdefault(dotted, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle through each group of modules that reach each other, as the modules in import order, the first
    again at the end: ["a", "b", "a"]. Empty where the imports have no cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in graph:  # Tarjan's strongly connected components, without recursion
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return [_cycle_through(min(group), group, graph) for group in groups]


def _cycle_through(start: str, group: set[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """The shortest way from `start` back to itself within `group`."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in graph[node]:
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target in group and target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle through {start}")


def layer_of(module: str) -> str:
    """grader.batch.schedule is in "batch", grader.lang in "lang", grader itself (its __init__.py) in "__init__"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@cache
def _grader_graph() -> dict[str, dict[str, int]]:
    return import_graph(GRADER)


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


def test_every_module_is_in_a_layer():
    unplaced = sorted({layer_of(module) for module in _grader_graph()} - set(RANK))
    assert not unplaced, f"put these in LAYERS here and in docs/architecture.md#layers: {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [f"{module} (line {line}) imports {imported}: {layer_of(imported)} is above {layer_of(module)}"
              for module, edges in _grader_graph().items() for imported, line in edges.items()
              if RANK.get(layer_of(imported), 0) > RANK.get(layer_of(module), 0)]
    assert not upward, "\n".join(upward)


def test_no_module_reaches_itself_through_its_imports():
    graph = _grader_graph()
    found = [" -> ".join(cycle) + "".join(f"\n    {module} imports {imported} on line {graph[module][imported]}"
                                          for module, imported in pairwise(cycle))
             for cycle in cycles(graph)]
    assert not found, "import cycles in grader/ (move what both need below both):\n" + "\n".join(found)


def test_the_import_graph_sees_every_import_and_every_cycle(tmp_path: Path):
    """The graph the layer tests read finds the imports a cycle can hide in, and the cycles they make."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "def __getattr__(name):\n    from pkg.sub import late\n    return late\n",
        "low.py": "import os\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.late import Late\n",
        "named.py": "import importlib\nmodule = importlib.import_module(f'pkg.sub.{1}')\n",
        "sub/__init__.py": "from . import late\n",
        "sub/late.py": "from .. import low\nfrom pkg import typed\nclass Late: ...\n",
        "sub/other.py": "from pkg.sub.late import Late\nimport pkg.low as low\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source)
    graph = import_graph(package)
    assert graph == {
        "pkg": {"pkg.sub.late": 2}, "pkg.low": {}, "pkg.typed": {"pkg.sub.late": 3}, "pkg.named": {"pkg.sub": 2},
        "pkg.sub": {"pkg.sub.late": 1}, "pkg.sub.late": {"pkg.low": 1, "pkg.typed": 2},
        "pkg.sub.other": {"pkg.sub.late": 1, "pkg.low": 2},
    }
    assert cycles(graph) == [["pkg.sub.late", "pkg.typed", "pkg.sub.late"]]
    graph["pkg.low"]["pkg.sub.other"] = 1  # one group of four modules now: one cycle named through it
    assert cycles(graph) == [["pkg.low", "pkg.sub.other", "pkg.low"]]


def test_no_two_classes_share_a_name():
    names = Counter(node.name for path in _modules(GRADER) for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ClassDef))
    assert not [name for name, count in names.items() if count > 1]


def test_every_module_says_its_job():
    """A module opens with what it is for; its functions stay small by ruff's C901 and PLR0913 (pyproject.toml),
    which guard what a cap on a module's lines only stood in for."""
    silent = [str(p.relative_to(GRADER)) for p in _modules(GRADER) if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not silent, f"say what these modules are for, in a docstring: {silent}"


# The worker backends (grader/host/backend.py): each protocol, and the classes of both backends that stand for it.
BACKENDS = {
    "WorkerHandle": ("grader.host.workers.WorkerProcess", "grader.host.spawned.PortableWorker"),
    "WorkerClient": ("grader.host.workers.Client", "grader.host.portable.PortableClient"),
    "WorkerSandbox": ("grader.host.sandbox.Sandbox", "grader.host.portable.PortableSandbox"),
}


def _instance_attributes(cls: type) -> set[str]:
    """What a class's instances hold: its class attributes and every `self.<name> = ...` of its methods."""
    import inspect
    import textwrap

    found = set(vars(cls))
    for klass in cls.__mro__[:-1]:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        found |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == "self"}
        found |= {node.target.attr for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                  and isinstance(node.target, ast.Attribute)}
    return found


@pytest.mark.parametrize("protocol, implementation",
                         [(p, i) for p, classes in BACKENDS.items() for i in classes])
def test_both_worker_backends_are_what_their_protocol_says(protocol: str, implementation: str):
    """Both backends stand behind one typed seam: every member a protocol names, the zygote's and the spawned
    workers' classes have, methods with the same parameters (names, kinds, keyword-only ones included)."""
    import importlib
    import inspect

    from grader.host import backend

    seam = getattr(backend, protocol)
    module, _, name = implementation.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    annotated = set(vars(seam).get("__annotations__", {}))
    wanted = {member for member in vars(seam) if not member.startswith("_")} | annotated
    problems = []
    for member in sorted(wanted):
        declared = getattr(seam, member, None)
        if callable(declared) and not isinstance(declared, property):
            actual = getattr(cls, member, None)
            if not callable(actual):
                problems.append(f"no method {member}")
                continue
            want = [(p.name, p.kind) for p in inspect.signature(declared).parameters.values()]
            have = [(p.name, p.kind) for p in inspect.signature(actual).parameters.values()]
            if want != have:
                problems.append(f"{member}{inspect.signature(actual)}, the protocol says {inspect.signature(declared)}")
        elif member not in _instance_attributes(cls) and not hasattr(cls, member):
            problems.append(f"no attribute {member}")
    assert not problems, f"{implementation} is not a {protocol}: " + "; ".join(problems)


def _environment_reads(path: Path) -> list[str]:
    """Where a module reads a `GRADER_*` variable from the process's environment: os.environ.get("GRADER_..."),
    os.environ["GRADER_..."], os.getenv("GRADER_..."), and the same on a name `environ` imported from os."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    from_os = any(isinstance(node, ast.ImportFrom) and node.module == "os" and
                  any(alias.name == "environ" for alias in node.names) for node in ast.walk(tree))
    readers = ("os.environ", "os.getenv", *(("environ",) if from_os else ()))  # not a mapping handed in as a parameter
    for node in ast.walk(tree):
        key = receiver = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            key, receiver = node.args[0], node.func.value if node.func.attr == "get" else node.func
        elif isinstance(node, ast.Subscript):
            key, receiver = node.slice, node.value
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("GRADER_")):
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            continue  # an environment built for a child: data handed down, not read
        text = ast.unparse(receiver)
        if text in readers:
            found.append(f"{path.relative_to(GRADER.parent)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_settings_reads_the_graders_environment():
    """`grader.settings` is the one module that reads a GRADER_* variable from the environment (docs/grading.md's
    table lists its VARIABLES); everything else asks it, or is handed what was decided as data."""
    from grader import settings

    reads = [read for path in _modules(GRADER) if path != GRADER / "settings.py" for read in _environment_reads(path)]
    assert not reads, "read settings through grader.settings:\n" + "\n".join(reads)
    assert _environment_reads(GRADER / "settings.py") == [], "settings reads through _read, checked against VARIABLES"
    source = (GRADER / "settings.py").read_text(encoding="utf-8")
    assert set(re.findall(r'"(GRADER_[A-Z_]+)"', source)) == set(settings.VARIABLES), "a variable not in VARIABLES"


def test_the_environment_check_finds_every_way_of_reading(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text('import os\nfrom os import environ\na = os.environ.get("GRADER_X")\nb = os.environ["GRADER_Y"]\n'
                      'c = os.getenv("GRADER_Z")\nd = environ.get("GRADER_W")\nenv = {}\nenv["GRADER_V"] = "1"\n'
                      'e = os.environ.get("HOME")\n')
    global GRADER
    saved, GRADER = GRADER, tmp_path / "grader"
    try:
        assert [line.split(": ", 1)[1] for line in _environment_reads(sample)] == [
            "os.environ.get('GRADER_X')", "os.environ['GRADER_Y']", "os.getenv('GRADER_Z')", "environ.get('GRADER_W')"]
    finally:
        GRADER = saved
