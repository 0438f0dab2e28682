"""A release never ships answers (issue 48, item 8). From a copy of the kit whose stubs an instructor filled (to try
the grader), `grader release` is refused in one line that names the file, the function and the fix, before it
writes anything, whatever the release's language; the pristine kit releases as before, and the kit's own notebooks,
filled or not, never reach a release: its notebooks are built from the stubs it ships.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader.curriculum import BY_ID, FIRST, with_prerequisites
from grader.release import ReleaseError, build

REPO = Path(__file__).resolve().parents[2]
# What a release is built from (the notebooks are the kit's own, which never ship).
KIT = ("exercises", "grader", "solutions", "tests/public", "tests/hidden", "notebooks", "docs", "tests/conftest.py",
       "pyproject.toml", ".gitignore", "README.md")
TWINS = Path("grader/locale/zh/exercises")


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the kit as an instructor clones it; a test that fills a stub puts it back."""
    copy = tmp_path_factory.mktemp("clone") / "attention-kit"
    for name in KIT:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / name, copy / name)
    return copy


@pytest.fixture
def filled(kit: Path) -> Iterator[Callable[[str, str], None]]:
    """`filled(path, text)` writes `text` to the kit's `path`; every file so written is put back afterwards."""
    kept: dict[Path, bytes | None] = {}

    def fill(path: str, text: str) -> None:
        target = kit / path
        kept.setdefault(target, target.read_bytes() if target.exists() else None)
        target.write_text(text, encoding="utf-8")

    yield fill
    for target, data in kept.items():
        if data is None:
            target.unlink()
        else:
            target.write_bytes(data)


def release(kit: Path, out: Path, *args: str, language: str = "en") -> subprocess.CompletedProcess[str]:
    """`grader release --out OUT ARGS` in the copy, as its instructor runs it, in a terminal speaking `language`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", "GRADER_LANG": language}
    return subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(out), *args], cwd=kit, env=env,
                          capture_output=True, text=True, timeout=120)


def refusal(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, f"exit {run.returncode}:\n{run.stdout}{run.stderr}"
    assert "Traceback" not in run.stdout + run.stderr and not run.stdout, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_a_release_from_a_kit_with_a_filled_exercise_is_refused_in_one_line(kit: Path, filled, tmp_path: Path):
    filled("exercises/attention.py", (REPO / "solutions" / "attention.py").read_text())
    assert refusal(release(kit, tmp_path / "student")) == (
        "grader: error: exercises/attention.py holds code that is not the kit's stub, in `attention`: a release "
        "never ships answers; put the stub back (e.g. `git checkout -- exercises/attention.py`) and release again")
    # The Chinese release ships the twins, but a kit with answers in it is no kit to release from.
    assert refusal(release(kit, tmp_path / "chinese", "--lang", "zh", "--autograder", language="zh")) == (
        "grader: 错误：exercises/attention.py 中的 `attention` 已不是工具包原样的练习代码：发布版本绝不能带上答案；"
        "请先把练习文件还原（例如 `git checkout -- exercises/attention.py`），再重新发布")
    assert not (tmp_path / "student").exists() and not (tmp_path / "chinese").exists(), "a refused release wrote files"


def _last_body_returns_none(path: Path) -> str:
    """The stub at `path` with its last `raise NotImplementedError(...)` (a whole line) turned into `return None`."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(index for index, line in enumerate(lines) if line.lstrip().startswith("raise NotImplementedError("))
    lines[last] = lines[last][: len(lines[last]) - len(lines[last].lstrip())] + "return None\n"
    return "".join(lines)


STUB = "holds code that is not the kit's stub"


def _read(path: str) -> Callable[[], str]:
    return lambda: (REPO / path).read_text(encoding="utf-8")


FILLS = {  # how an instructor filled the kit: {what: (file, its new text, how the refusal begins)}
    "one body written": ("exercises/masking.py", lambda: _last_body_returns_none(REPO / "exercises" / "masking.py"),
                         f"exercises/masking.py {STUB}, in `causal_mask`"),
    "a class's solution": ("exercises/decoder.py", _read("solutions/decoder.py"),
                           f"exercises/decoder.py {STUB}, in `DecoderLayer.__init__`"),
    "the solution imported over the stub": (
        "exercises/attention.py",
        lambda: _read("exercises/attention.py")() + "\nfrom solutions.attention import attention  # noqa: E402, F811\n",
        f"exercises/attention.py {STUB}, at line {len(_read('exercises/attention.py')().splitlines()) + 2}:"),
    "a Chinese stub filled": (f"{TWINS}/transformer.py", _read("solutions/transformer.py"),
                              f"{TWINS}/transformer.py {STUB}, in `Transformer.__init__`"),
    "the given config changed": (
        "exercises/config.py", lambda: _read("exercises/config.py")().replace("dim: int = 512", "dim: int = 64"),
        f"exercises/config.py {STUB}, at line 10:"),
    "a file of answers beside the stubs": ("exercises/answers.py", lambda: "ANSWER = 42\n",
                                           "exercises/answers.py is not one of the kit's stubs"),
}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("how", list(FILLS))
def test_every_way_of_filling_the_kit_is_refused_before_anything_is_written(kit: Path, filled, tmp_path: Path, how,
                                                                            language):
    path, text, refused = FILLS[how]
    filled(path, text())
    with pytest.raises(ReleaseError) as caught:
        build(tmp_path / "release", language=language, root=kit)
    assert str(caught.value).startswith(refused), str(caught.value)
    assert not (tmp_path / "release").exists()


def test_the_pristine_kit_still_releases_and_a_filled_notebook_stays_behind(kit: Path, filled, tmp_path: Path):
    """The kit's notebooks/ never ship: the release's are built from its stubs, as the kit's own are."""
    notebook = json.loads((kit / "notebooks" / "01-attention.ipynb").read_text(encoding="utf-8"))
    stub_cell = next(cell for cell in notebook["cells"] if "def attention(" in "".join(cell["source"]))
    stub_cell["source"] = (REPO / "solutions" / "attention.py").read_text()
    filled("notebooks/01-attention.ipynb", json.dumps(notebook, indent=1))

    run = release(kit, tmp_path / "student")
    assert run.returncode == 0 and "Wrote the student distribution" in run.stdout, run.stdout + run.stderr
    first = {exercise.id for exercise in with_prerequisites(FIRST)}  # what a default release ships
    for stub in (REPO / "exercises").glob("*.py"):
        if stub.stem in first or stub.stem not in BY_ID:
            assert (tmp_path / "student" / "exercises" / stub.name).read_bytes() == stub.read_bytes(), stub.name
    for kept in (REPO / "notebooks").glob("*.ipynb"):
        if kept.stem.split("-", 1)[1] in first:
            assert (tmp_path / "student" / "notebooks" / kept.name).read_bytes() == kept.read_bytes(), kept.name
