"""The device tests on a machine without a GPU: feedback worth no points, so a forged verdict gains nothing.

Without a second real device the check runs on a stand-in (fake tensors on "meta", `probes.on_another_device`
in the worker), and code in the worker can rewrite that probe or tell the stand-in from a GPU. So on a CPU the
test tells a student what mixes devices and is worth nothing; its points are earned in a run with
`--device cuda`, on values checked in the trusted process (not exercised here: this machine has no GPU).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = (REPO / "solutions" / "masking.py").read_text(encoding="utf-8")
NO_DEVICE = REFERENCE.replace("torch.ones(T, T, dtype=x.dtype, device=x.device)", "torch.ones(T, T, dtype=x.dtype)")
# Code that runs at import and makes the worker's device probe say "nothing mixes devices", whatever it is given.
FORGED_PROBE = '''

def _forge():
    import sys
    for name, module in list(sys.modules.items()):
        if name.endswith(".probes") and hasattr(module, "on_another_device"):
            module.on_another_device = lambda *args, **kwargs: ""


_forge()
'''
DEVICE_TEST = "test_works_for_inputs_on_any_device"


@pytest.fixture(scope="module")
def masking_runs(warm_grader, tmp_path_factory) -> dict[str, dict]:
    """masking, as the reference, without device= (an honest device mistake), and that plus a forged probe."""
    assert NO_DEVICE != REFERENCE, "the reference's torch.ones(T, T, ...) line moved: update this test"
    sources = {"reference": REFERENCE, "no_device": NO_DEVICE, "no_device_forged": NO_DEVICE + FORGED_PROBE}
    folders = []
    for name, source in sources.items():
        folder = tmp_path_factory.mktemp(name)
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name not in ("__init__.py", "config.py"):
                shutil.copyfile(solution, folder / solution.name)
        (folder / "masking.py").write_text(source, encoding="utf-8")
        folders.append((folder, ("masking",)))
    runs = {}
    for name, run in zip(sources, warm_grader.grade(folders), strict=True):
        assert run.returncode == 0, run.describe()
        runs[name] = run.exercise("masking")
    return runs


def device_tests(result: dict) -> list[dict]:
    found = [test for test in result["tests"] if DEVICE_TEST in test["name"]]
    assert len(found) == 2, [test["name"] for test in result["tests"]]
    return found


def test_on_a_cpu_the_device_tests_are_worth_nothing_and_the_reference_passes_them(masking_runs):
    reference = masking_runs["reference"]
    assert reference["score"] == reference["max_score"]
    assert all(test["outcome"] == "passed" and test["max_points"] == 0 for test in device_tests(reference))


def test_a_tensor_made_without_the_inputs_device_gets_feedback_and_loses_nothing_on_a_cpu(masking_runs):
    honest = masking_runs["no_device"]
    failed = [test for test in device_tests(honest) if test["outcome"] == "failed"]
    assert failed, "the stand-in device no longer catches torch.ones(T, T) without device="
    assert all("device=x.device" in test["message"] and "Feedback only" in test["message"] for test in failed)
    assert honest["score"] == masking_runs["reference"]["score"]


def test_a_forged_device_probe_gains_nothing(masking_runs):
    forged, honest = masking_runs["no_device_forged"], masking_runs["no_device"]
    assert all(test["outcome"] == "passed" for test in device_tests(forged)), "the forgery did not take effect"
    assert forged["score"] <= honest["score"]
