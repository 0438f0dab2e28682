"""Deployments rehearsed as they happen, shared by the kit tests that need one (test_recipes.py, test_notebooks.py).

`deploy_gradescope` is the conftest's session fixture `gradescope`: one image built per test session, by the
bundle's own setup.sh, and graded through its own run_autograder.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--")
DOCKER_BWRAP = "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"
UNSET = ("GRADER_SANDBOX", "GRADER_BWRAP", "GRADER_EXTRA_ARGS", "GRADER_STAGE_DIR", "PYTHONPATH", "VIRTUAL_ENV")

def plain_environment(**more: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in UNSET}
    return {**environment, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", **more}


def make_python(where: Path, *, prefix: tuple[str, ...] = ()) -> Path:
    """A venv at `where` that sees this Python's packages, as the image's Python or the runner's `setup-python`
    would be; returns its bin/ folder. Without a pip of its own: this Python's pip and setuptools serve it, so
    that torch and what torch needs are found installed, and PyTorch's index (which this machine cannot
    reach) is never asked."""
    subprocess.run([*prefix, sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(where)],
                   check=True, timeout=120)
    # A test run from inside a venv: --system-site-packages would reach only the base Python's packages.
    pth = next(where.glob("lib/python3*/site-packages")) / "kit-test-packages.pth"
    pth.write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    return where / "bin"


def program(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


@dataclass
class Gradescope:
    root: Path  # AUTOGRADER_ROOT
    python: Path  # the image's Python, first on PATH
    docker_bwrap: Path  # a folder holding a bwrap that fails as Docker's does
    setup_output: str

    def run(self, submission: Path | None, *, bwrap_refused: bool, **env: str) -> tuple[int, dict[str, Any], str]:
        """Gradescope's turn for one submission: its files in submission/, then `run_autograder` as root.
        Returns its exit code, the results.json it left and what it printed on stderr."""
        shutil.rmtree(self.root / "submission", ignore_errors=True)
        shutil.rmtree(self.root / "results", ignore_errors=True)
        if submission is not None:
            (self.root / "submission").mkdir()
            for file in [*submission.glob("*.py"), *submission.glob("*.ipynb")]:
                shutil.copyfile(file, self.root / "submission" / file.name)
        path = [*([str(self.docker_bwrap)] if bwrap_refused else []), str(self.python), os.environ["PATH"]]
        done = subprocess.run(["bash", str(self.root / "source" / "run_autograder")], capture_output=True, text=True,
                              timeout=300, env=plain_environment(AUTOGRADER_ROOT=str(self.root),
                                                                 PATH=os.pathsep.join(path), **env))
        results = self.root / "results" / "results.json"
        said = done.stderr[-2000:]
        assert results.is_file(), f"run_autograder (exit {done.returncode}) wrote no results.json:\n{said}"
        assert results.parent.stat().st_mode & 0o777 == 0o755
        return done.returncode, json.loads(results.read_text()), done.stderr

    def sandbox(self) -> str | None:
        report = self.root / "results" / "report.json"
        return json.loads(report.read_text()).get("sandbox") if report.is_file() else None


def deploy_gradescope() -> Iterator[Gradescope]:
    """The bundle as Gradescope builds its image: `grader release --autograder`, unpacked in source/, then the
    bundle's own setup.sh as root, with a venv under /tmp as the image's `python3`; removed when done."""
    base = Path(tempfile.mkdtemp(prefix="kit-gradescope-"))  # not under pytest's folder: setup.sh opens its way
    try:
        release = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(base / "build"),
                                  "--autograder"], cwd=REPO, capture_output=True, text=True, timeout=120,
                                 env=plain_environment(PYTHONPATH=str(REPO)))
        assert release.returncode == 0, release.stderr
        root = base / "autograder"
        root.mkdir()
        shutil.copytree(base / "build", root / "source", symlinks=True)  # what Gradescope unzips
        python = make_python(base / "python")
        setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True,
                               timeout=600, env=plain_environment(
                                   AUTOGRADER_ROOT=str(root), GRADER_SETUP_SKIP_SYSTEM="1",
                                   PATH=f"{python}{os.pathsep}{os.environ['PATH']}"))
        said = f"{setup.stdout[-3000:]}\n{setup.stderr[-3000:]}"
        assert setup.returncode == 0, f"setup.sh exit {setup.returncode}:\n{said}"
        yield Gradescope(root, python, program(base / "docker", "bwrap", DOCKER_BWRAP).parent,
                         setup.stdout + setup.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
