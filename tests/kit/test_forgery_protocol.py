"""Forged protocol frames: a correct submission that writes to the grader's reply pipe itself scores no more than
it would without the attack, the grader exits 0 with its report, and no later test is answered out of turn.

Each submission in submissions/forgery/protocol_*/ holds the same correct `attention` as `protocol_baseline/`, plus
an attack on the worker's reply pipe (found through the worker's own frames, as any code in the worker can find
it). The call-time attacks strike once per sandbox: only the test whose call met the forgery may lose points,
and it must say that the submission broke the protocol. Graded here at the default tier (bubblewrap), cold;
test_forged_verdicts grades them at the user and none tiers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grader.host.bubblewrap import bwrap_problem

FORGERY = Path(__file__).resolve().parent / "submissions" / "forgery"
BASELINE = "protocol_baseline"
ATTACKS = sorted(p.name for p in FORGERY.glob("protocol_*") if p.is_dir() and p.name != BASELINE)
EVERY_IMPORT = {"protocol_deep_json_at_import"}  # strikes at every import: no test of the exercise can pass
BLAME = "broke the grader's protocol"

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no bubblewrap here: {bwrap_problem()}")


def graded(grader_cli, tmp_path_factory, name: str) -> Any:
    run = grader_cli.check(FORGERY / name, tmp_path_factory.mktemp(name) / "report.json")
    assert not run.timed_out, run.describe()
    assert run.returncode == 0, run.describe()
    assert run.report is not None, f"no report written\n{run.describe()}"
    problems = run.report_problems()
    assert not problems, "report breaks the contract:\n" + "\n".join(problems)
    assert run.report["sandbox"] == "bubblewrap", run.report["sandbox"]
    return run


@pytest.fixture(scope="module")
def baseline(grader_cli, tmp_path_factory) -> dict[str, dict[str, Any]]:
    run = graded(grader_cli, tmp_path_factory, BASELINE)
    tests = {t["name"]: t for t in run.exercise("attention")["tests"]}
    assert all(t["outcome"] == "passed" for t in tests.values()), run.feedback("attention")
    return tests


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_forged_frame_costs_points_only_where_it_struck_and_never_desynchronises(attack, baseline, grader_cli,
                                                                                   tmp_path_factory):
    run = graded(grader_cli, tmp_path_factory, attack)
    tests = {t["name"]: t for t in run.exercise("attention")["tests"]}
    assert tests.keys() == baseline.keys(), "the attack changed which tests ran"
    assert run.report["score"] <= sum(t["points"] for t in baseline.values()), f"{attack}: its attack raised the score"
    lost = [name for name, test in tests.items() if (test["outcome"], test["points"]) !=
            (baseline[name]["outcome"], baseline[name]["points"])]
    for name in lost:
        assert BLAME in tests[name]["message"], f"{name} lost points without blaming the forgery:\n" \
                                                f"{tests[name]['message']}"
    if attack in EVERY_IMPORT:
        assert len(lost) == len(tests), run.feedback("attention")
    else:  # one forgery, one victim: every later test is answered by its own reply, as for the baseline
        assert len(lost) == 1, f"{attack}: {len(lost)} tests lost points:\n{run.feedback('attention')}"
