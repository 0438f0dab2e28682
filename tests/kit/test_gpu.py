"""Grading on a GPU, as an instructor with one runs it: `grader check --device cuda`.

Skipped where CUDA is not present (every machine this kit's CI has: none lends a GPU). On a GPU machine,
`python benchmarks/gpu.py` runs this file and the grading-time benchmark on the GPU: the reference scores full marks,
the stubs zero, and each tensor made without the input's device (test_devices.MADE_ON_THE_CPU: caught by a fake
device on a CPU, worth nothing there) loses points in its exercise, where the tests that run on the real device
are worth points.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from test_devices import MADE_ON_THE_CPU

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: run benchmarks/gpu.py on a GPU")


def _cuda_check(grader_cli, submission: Path, json_path: Path, *exercises: str):
    run = grader_cli.run("check", *exercises, "--submission", str(submission), "--device", "cuda",
                         json_path=json_path)
    assert run.returncode == 0 and isinstance(run.report, dict), run.describe()
    assert run.report["device"].startswith("cuda"), run.report["device"]
    assert not run.report_problems(), run.report_problems()
    return run


def test_the_reference_scores_full_marks_on_the_gpu(grader_cli, tmp_path):
    run = _cuda_check(grader_cli, REPO / "solutions", tmp_path / "reference.json")
    assert run.report["score"] == pytest.approx(run.report["max_score"]), run.stdout[-3000:]


def test_the_stubs_score_zero_on_the_gpu(grader_cli, tmp_path):
    run = _cuda_check(grader_cli, REPO / "exercises", tmp_path / "stubs.json")
    assert run.report["score"] == 0, run.stdout[-3000:]


@pytest.mark.parametrize("made", MADE_ON_THE_CPU, ids=lambda made: made[1])
def test_a_tensor_made_on_the_cpu_loses_points_on_the_gpu(grader_cli, tmp_path, made):
    exercise, function, _, (old, new) = made
    folder = tmp_path / "submission"
    shutil.copytree(REPO / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / f"{exercise}.py").read_text(encoding="utf-8")
    assert source.count(old) == 1, old
    (folder / f"{exercise}.py").write_text(source.replace(old, new), encoding="utf-8")
    run = _cuda_check(grader_cli, folder, tmp_path / "report.json", exercise)
    result = next(e for e in run.report["exercises"] if e["id"] == exercise)
    assert result["score"] < result["max_score"], f"{function} made on the CPU kept full marks:\n{run.stdout}"
    assert any("device" in t["message"] for t in result["tests"] if t["outcome"] != "passed"), result["tests"]
