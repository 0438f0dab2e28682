"""The engine's own guarantees: plain data across the boundary, safe submission loading, scoring,
atomic reports, and a worker that survives crashes and cannot see the kit."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import psutil
import pytest
import torch

from grader.curriculum import SUBMISSION_FILES
from grader.grade.reports import GradeReport, to_exercism, to_gradescope, write_json
from grader.grade.scoring import score
from grader.grade.selection import UsageError, select
from grader.host import tiers
from grader.host.bubblewrap import bwrap_problem
from grader.host.failures import NotImplementedYet, SubmissionFailure, WorkerCrash
from grader.host.limits import Limits
from grader.host.sandbox import Sandbox
from grader.host.session import GradingSession
from grader.inside.shared import protocol
from grader.intake.submission import SubmissionInputError, load
from grader.judge.feedback import causes_of, feedback
from grader.judge.reach import used_names
from grader.testing import backward, float64, golden

REPO = Path(__file__).resolve().parents[2]
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox here: {bwrap_problem()}")


# --- protocol ----------------------------------------------------------------------------------


def roundtrip(value):
    read_fd, write_fd = os.pipe()
    encoder = protocol.Encoder(lambda obj: pytest.fail(f"unexpected object {obj!r}"))
    protocol.write_message(write_fd, {"value": encoder.encode(value)}, encoder.tensors)
    os.close(write_fd)
    header, tensors = protocol.read_message(read_fd, deadline=None)
    os.close(read_fd)
    return protocol.Decoder(tensors, lambda h: pytest.fail("no handles here"),
                            place=lambda t, device, grad: t).decode(header["value"])


def test_values_survive_the_round_trip_exactly():
    x = torch.randn(3, 4, dtype=torch.float64)
    value = {"t": x, "pair": (x[0], torch.arange(3)), "empty": torch.zeros(0, 5), "dtype": torch.float32,
             "nums": [1, 2.5, math.inf, None, True, "s"], "mask": torch.ones(2, 2, dtype=torch.bool)}
    back = roundtrip(value)
    assert torch.equal(back["t"], x) and back["t"].dtype == torch.float64
    assert isinstance(back["pair"], tuple) and torch.equal(back["pair"][0], x[0])
    assert back["empty"].shape == (0, 5) and back["dtype"] is torch.float32
    assert back["nums"] == [1, 2.5, math.inf, None, True, "s"] and back["mask"].dtype == torch.bool
    nan = roundtrip(float("nan"))
    assert math.isnan(nan)


def test_a_float64_golden_equals_a_float64_copy_and_leaves_the_reference_as_it_was():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    parameters, before = list(module.parameters()), copy.deepcopy(module.state_dict())
    copy64, x, grad_output = copy.deepcopy(module).double(), torch.randn(2, 4), torch.randn(2, 3).double()
    assert torch.equal(golden(module, x), copy64(x.double()))
    with float64(module):
        got = backward(module, x.double(), grad_output=grad_output)
    want = backward(copy64, x.double(), grad_output=grad_output)
    assert all(g.dtype == torch.float64 and torch.equal(g, want.parameters[n]) for n, g in got.parameters.items())
    assert all(a is b for a, b in zip(module.parameters(), parameters, strict=True))
    assert all(p.grad is None for p in parameters)
    after = module.state_dict()
    assert all(after[k].dtype == torch.float32 and torch.equal(after[k], v) for k, v in before.items())
    with pytest.raises(ValueError, match="float32 module"), float64(copy64):
        pass


def test_tensor_subclasses_are_refused_at_the_boundary():
    class Agreeable(torch.Tensor):
        pass

    with pytest.raises(protocol.ProtocolError, match=r"subclass of torch\.Tensor"):
        protocol.Encoder(lambda obj: {}).encode(torch.zeros(2).as_subclass(Agreeable))


def test_oversized_and_malformed_messages_are_refused():
    read_fd, write_fd = os.pipe()
    protocol.write_message(write_fd, {"value": 1}, {"t0": torch.zeros(1000)})
    with pytest.raises(protocol.ProtocolError, match="over the"):
        protocol.read_message(read_fd, max_blob_bytes=100)
    os.write(write_fd, b"EVIL" + b"\0" * 16)
    with pytest.raises(protocol.ProtocolError):
        protocol.read_message(read_fd, deadline=None)
    decoder = protocol.Decoder({}, lambda h: None, place=lambda t, d, g: t)
    for bad in ({"$tensor": "t9"}, {"$pickle": "..."}, {"$device": "file:///etc"}, {}):
        with pytest.raises(protocol.ProtocolError):
            decoder.decode(bad)
    os.close(read_fd)
    os.close(write_fd)


def test_a_silent_peer_times_out():
    read_fd, write_fd = os.pipe()
    import time

    with pytest.raises(protocol.Timeout):
        protocol.read_message(read_fd, deadline=time.monotonic() + 0.2)
    os.close(read_fd)
    os.close(write_fd)


# --- submissions -------------------------------------------------------------------------------


def test_only_exercise_files_are_read_from_a_folder(tmp_path):
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "attention.py").write_text("x = 1\n")
    (tmp_path / "exercises" / "conftest.py").write_text("boom\n")
    (tmp_path / "exercises" / "config.py").write_text("boom\n")
    loaded = load(tmp_path)
    assert set(loaded.files) == {"attention.py"}
    assert "masking.py" in loaded.missing


def test_zip_with_a_top_folder_is_found(tmp_path):
    archive = tmp_path / "alice.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("alice-hw/exercises/attention.py", "x = 1\n")
        z.writestr("alice-hw/notes.txt", "hi")
    loaded = load(archive)
    assert loaded.name == "alice" and loaded.files == {"attention.py": b"x = 1\n"}


@pytest.mark.parametrize("entry", ["../attention.py", "/etc/attention.py", "a/../../attention.py"])
def test_zip_entries_escaping_the_folder_are_refused(tmp_path, entry):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(entry, "x = 1\n")
    with pytest.raises(SubmissionInputError, match="unsafe path"):
        load(archive)


def test_zip_symlinks_are_refused(tmp_path):
    archive = tmp_path / "link.zip"
    info = zipfile.ZipInfo("attention.py")
    info.external_attr = (0o120777 << 16)
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(info, "/etc/passwd")
    with pytest.raises(SubmissionInputError, match="link"):
        load(archive)


def test_unknown_exercise_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown exercise 'atention'"):
        select(["atention"], None)


# --- scoring and reports -----------------------------------------------------------------------


def fake_pytest_report(*tests):
    return {"tests": [{"nodeid": f"tests/{suite}/test_attention.py::{name}", "outcome": outcome,
                       "metadata": {"exercise": "attention", "points": points, "message": "m"}}
                      for suite, name, outcome, points in tests]}


def test_weights_are_scaled_to_the_exercise_points_and_failures_score_zero():
    report = fake_pytest_report(("public", "a", "passed", 2), ("public", "b", "failed", 1),
                                ("hidden", "c", "error", 1), ("hidden", "d", "skipped", 5))
    [attention] = score(report, ["attention"])
    assert attention.max_score == 10 and attention.score == pytest.approx(5.0)
    points = {t.name.split("::")[-1]: (t.points, t.max_points) for t in attention.tests}
    assert points == {"a": (5.0, 5.0), "b": (0.0, 2.5), "c": (0.0, 2.5), "d": (0.0, 0.0)}


def test_tests_skipped_by_quick_still_count_against_the_maximum():
    report = fake_pytest_report(("public", "a", "passed", 1), ("hidden", "capstone", "skipped", 1))
    report["tests"][1]["metadata"]["counts_when_skipped"] = True
    [attention] = score(report, ["attention"])
    assert attention.score == 5.0 and attention.max_score == 10
    assert attention.status == "slow tests skipped"


def test_an_exercise_whose_tests_could_not_load_scores_zero():
    report = {"tests": [], "collectors": [{"nodeid": "tests/hidden/test_attention.py", "outcome": "failed",
                                           "longrepr": "SyntaxError"}]}
    [attention] = score(report, ["attention"])
    assert attention.score == 0 and attention.tests[-1].outcome == "error"


MASK_TEST = "tests/public/test_masking.py::test_causal_mask_is_zero_below_and_minus_infinity_above"
WRONG_MASK = ("causal_mask(4) differs at index (0, 0, 0, 0): got -inf, expected 0.\n"
              "Diagnosis: causal_mask blocks the diagonal too.")
MHA_SUBMISSIONS = REPO / "tests" / "kit" / "submissions" / "multi_head_attention" / "correct"


def reported(nodeid: str, outcome: str, names: tuple[str, ...], message: str = "", causes: tuple[str, ...] = ()):
    """One test of a pytest-json-report report, with what the plugin attaches: its message, causes and the contract
    names it exercises."""
    metadata = {"message": message, "contract_names": list(names), **({"causes": list(causes)} if causes else {})}
    return {"nodeid": nodeid, "outcome": outcome, "metadata": metadata}


def mha_uses(source: str) -> dict[str, frozenset[str]]:
    """What a submission whose multi_head_attention.py is `source` uses of the other exercises."""
    return used_names({"multi_head_attention.py": source.encode()})


def test_failures_point_at_a_failing_prerequisite():
    report = {"tests": [
        reported(MASK_TEST, "failed", ("causal_mask",), "bad mask"),
        reported("tests/public/test_multi_head_attention.py::b", "failed", ("MultiHeadAttention",), "m"),
        reported("tests/public/test_head_attention.py::c", "failed", ("HeadAttention",), "h"),
    ]}
    uses = mha_uses((REPO / "solutions" / "multi_head_attention.py").read_text())
    masking, head, mha = score(report, ["masking", "head_attention", "multi_head_attention"], uses=uses)
    assert mha.blocked_by == ("masking",) and mha.tests[0].message.startswith("blocked by masking")
    assert masking.blocked_by == () and head.blocked_by == () and head.tests[0].message == "h"


def test_a_prerequisite_run_only_as_evidence_blocks_without_being_reported():
    """An exercise checked alone runs its prerequisites' tests too, unreported: where one fails, the exercise is
    blocked by it, and its failures' hints (a NaN's, about its own softmax) give way to what the prerequisite fails."""
    assert select(["multi_head_attention"], "public").prerequisites == ("attention", "masking")
    assert select(["attention", "masking", "multi_head_attention"], "public").prerequisites == ()
    assert select(None, "public").prerequisites == ()
    uses = mha_uses((REPO / "solutions" / "multi_head_attention.py").read_text())
    for masking, blocked in (("failed", True), ("passed", False)):
        report = {"tests": [
            reported(MASK_TEST, masking, ("causal_mask",), WRONG_MASK if masking == "failed" else ""),
            reported("tests/public/test_multi_head_attention.py::test_golden", "failed", ("MultiHeadAttention",),
                     "output has 32 NaN value(s). Hint: a softmax of all -inf is NaN."),
        ]}
        [mha] = score(report, ["multi_head_attention"], prerequisites_run=("attention", "masking"), uses=uses)
        assert mha.blocked_by == (("masking",) if blocked else ()), mha
        if blocked:
            assert mha.tests[0].message == (
                "blocked by masking: it fails its own tests and multi_head_attention builds on it, so fix it first. "
                "output has 32 NaN value(s). Hint: masking fails its test "
                "test_causal_mask_is_zero_below_and_minus_infinity_above: causal_mask blocks the diagonal too.")
        else:
            assert mha.tests[0].message.endswith("Hint: a softmax of all -inf is NaN.")


REFERENCE_MHA = (REPO / "solutions" / "multi_head_attention.py").read_text()
UNUSED_IMPORT = REFERENCE_MHA.replace("from .masking import causal_mask\n",
                                      "from .attention import attention  # noqa: F401\n"
                                      "from .masking import causal_mask\n")
WRONG_ATTENTION = reported("tests/public/test_attention.py::test_course_notes_worked_example", "failed",
                           ("attention",), "attention(q, k, v) differs at index (0, 1). Hint: softmax over the keys.")
WRONG_AVERAGE = reported("tests/public/test_masking.py::test_causal_average_of_one_two_three", "failed",
                         ("causal_average",), "causal_average differs at index (1, 0): got 1.5, expected 1.5.")
MASKS_DISAGREE = reported("tests/hidden/test_masking.py::test_keep_mask_and_additive_mask_give_the_same_softmax[L2]",
                          "failed", ("create_look_ahead_mask", "causal_mask"), "the two masks give different weights")


@pytest.mark.parametrize(("source", "prerequisite", "causes", "blocked"), [
    (REFERENCE_MHA, WRONG_ATTENTION, (), ()),  # the reference never calls attention()
    (UNUSED_IMPORT, WRONG_ATTENTION, (), ()),  # an import is no use: stubs import what they may never call
    ((MHA_SUBMISSIONS / "sdpa_dropout_p.py").read_text(), WRONG_ATTENTION, (), ()),  # F.scaled_dot_product_attention
    ((MHA_SUBMISSIONS / "reuses_attention.py").read_text(), WRONG_ATTENTION, (), ("attention",)),
    (REFERENCE_MHA, WRONG_AVERAGE, (), ()),  # uses causal_mask, and only causal_average fails
    (REFERENCE_MHA, MASKS_DISAGREE, (), ()),  # may fail for create_look_ahead_mask, which it does not use
    ((MHA_SUBMISSIONS / "sdpa_dropout_p.py").read_text(), WRONG_ATTENTION, ("blocked:attention",), ("attention",)),
], ids=["reference", "unused import", "sdpa", "reuses attention", "causal_average", "two masks", "unwritten"])
def test_blocked_only_where_the_code_uses_what_the_prerequisite_fails(source, prerequisite, causes, blocked):
    """A prerequisite that fails blocks an exercise only where the exercise's code uses a name of it that a failing
    test exercises, or a test stopped in its unwritten code: elsewhere the failures keep their own hints."""
    own = "the output differs at index (0, 2, 5). Hint: scale by sqrt(head_dim), not sqrt(dim)."
    report = {"tests": [prerequisite, reported("tests/public/test_multi_head_attention.py::test_matches_golden",
                                               "failed", ("MultiHeadAttention",), own, causes)]}
    [mha] = score(report, ["multi_head_attention"], prerequisites_run=("attention", "masking"), uses=mha_uses(source))
    assert mha.blocked_by == blocked, mha
    if blocked and not causes:
        assert mha.tests[0].message.startswith("blocked by attention:") and "Hint: attention fails its test" in \
            mha.tests[0].message and "sqrt(head_dim)" not in mha.tests[0].message, mha.tests[0].message
    elif not blocked:
        assert mha.tests[0].message == own


def test_watch_is_fed_the_failures_no_prerequisite_blocks(tmp_path: Path):
    """`grader watch` shows a first failure as it happens: not one of a prerequisite run for evidence, nor one of an
    exercise blocked on scoring's evidence; a MultiHeadAttention that never calls the failing attention() is fed."""
    from types import SimpleNamespace

    from grader.grade.runner import FailureFeed

    def failed(nodeid: str, names: tuple[str, ...]) -> SimpleNamespace:
        metadata = {"message": nodeid, "contract_names": list(names), "points": 1.0}
        return SimpleNamespace(nodeid=nodeid, failed=True, _json_report_extra={"metadata": metadata})

    for prerequisite, fed in ((WRONG_ATTENTION, True), (reported(MASK_TEST, "failed", ("causal_mask",)), False)):
        feed = FailureFeed()
        feed.path, feed.prerequisites, feed.uses = tmp_path / "feed.jsonl", ("attention", "masking"), mha_uses(
            REFERENCE_MHA)
        feed.path.unlink(missing_ok=True)
        feed.pytest_runtest_logreport(failed(prerequisite["nodeid"], tuple(prerequisite["metadata"]["contract_names"])))
        feed.pytest_runtest_logreport(failed("tests/public/test_multi_head_attention.py::test_matches_golden",
                                             ("MultiHeadAttention",)))
        lines = feed.path.read_text().splitlines() if feed.path.exists() else []
        assert [json.loads(line)["test"].rpartition("::")[2] for line in lines] == (["test_matches_golden"] if fed
                                                                                    else []), prerequisite


def test_the_code_of_what_an_exercise_uses_is_its_code_too():
    """The Transformer of the reference reaches causal_mask through its Decoder's MultiHeadAttention; a name a file
    binds otherwise too (a local variable `attention`) is no evidence of a use."""
    files = {path.name: path.read_bytes() for path in (REPO / "solutions").glob("*.py")}
    assert "causal_mask" in used_names(files)["transformer"]
    assert used_names(files)["attention"] == frozenset()
    shadowed = REFERENCE_MHA.replace("from .masking import causal_mask\n",
                                     "from .attention import attention\nfrom .masking import causal_mask\n")
    shadowed = shadowed.replace("        B, T_q, dim = q.shape\n",
                                "        B, T_q, dim = q.shape\n        attention = None\n        print(attention)\n")
    assert "attention = None" in shadowed and mha_uses(shadowed)["multi_head_attention"] == {"causal_mask"}


def test_a_hint_that_assumes_a_failing_test_is_left_out_and_says_which():
    """A case's hint (a mask's) assumes the plain case is right; where the plain case fails too, the hint has no
    evidence: it goes, the message names the plain case. A hint from what the failure measured stays."""
    def test(name, outcome, message="", **metadata):
        return {"nodeid": f"tests/hidden/test_attention.py::{name}", "outcome": outcome,
                "metadata": {"message": message, **metadata}}

    masked = "p_attn differs. Hint: mask is a keep mask."
    after = {"hint_after": ["test_plain"]}
    for plain, kept in (("failed", False), ("passed", True)):
        report = {"tests": [test("test_plain[a]", plain, "plain differs. Hint: scores = q @ k^T."),
                            test("test_plain[b]", "passed"),
                            test("test_mask", "failed", masked, **after),
                            test("test_diagnosed", "failed", "differs. Hint: a known mistake.", hint_measured=True,
                                 **after),
                            test("test_plain[c]", plain, "c differs. Hint: about c.", hint_after=["test_plain"])]}
        messages = {t.name.split("::")[1]: t.message for t in score(report, ["attention"])[0].tests}
        assert (messages["test_mask"] == masked) is kept, messages["test_mask"]
        assert messages["test_diagnosed"].endswith("Hint: a known mistake.")
        if not kept:
            assert messages["test_mask"] == "p_attn differs. (No hint here: test_plain fails too; start there.)"
            assert "Hint: about c." not in messages["test_plain[c]"]  # test_plain[a], another case, fails
            assert messages["test_plain[a]"].endswith("Hint: scores = q @ k^T.")  # never its own reason


def test_an_unfinished_prerequisite_file_is_blamed_for_its_not_implemented_error():
    unfinished = NotImplementedYet("multi_head_attention.MultiHeadAttention() is not implemented yet")
    unfinished.file = "masking.py"
    assert feedback(unfinished, exercise="multi_head_attention").startswith("blocked by masking")
    assert not feedback(unfinished, exercise="masking").startswith("blocked by")
    # Scoring reads the blame from the causes the trusted side records, never from those words.
    assert causes_of(unfinished, "multi_head_attention") == ["unwritten", "blocked:masking"]
    assert causes_of(unfinished, "masking") == ["unwritten"]
    # Any other error raised there may come from what the caller passed in: no blame from the file.
    raised = SubmissionFailure("multi_head_attention.MultiHeadAttention() raised ValueError: bad shape")
    raised.file = "masking.py"
    assert not feedback(raised, exercise="multi_head_attention").startswith("blocked by")


def test_a_percentage_shows_100_only_for_full_marks_and_0_only_for_none():
    """99.74 of 100 beside a failing test is never "100%" (issue 47), but 99.7%: the table's total, `grader list` and
    --fail-under's message all show shown_percent."""
    from grader.grade.reports import shown_percent

    shown = {earned: shown_percent(earned, 100) for earned in (0, 0.04, 0.3, 1, 45.6, 99, 99.74, 99.999, 100)}
    assert shown == {0: "0", 0.04: "0.1", 0.3: "0.3", 1: "1", 45.6: "45", 99: "99", 99.74: "99.7", 99.999: "99.9",
                     100: "100"}
    report = fake_pytest_report(*[("public", f"t{n}", "passed", 1) for n in range(383)], ("public", "x", "failed", 1))
    grade = GradeReport("sub", "public", "cpu", 1.0, torch.__version__, tuple(score(report, ["attention"])))
    assert 99 < grade.percent < 100 and grade.percent_shown == "99.5"


def test_reports_are_written_atomically_and_gradescope_hides_hidden_tests(tmp_path):
    report = fake_pytest_report(("public", "a", "passed", 1), ("hidden", "b", "failed", 1))
    grade = GradeReport("sub", "all", "cpu", 1.0, torch.__version__, tuple(score(report, ["attention"])))
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    write_json(grade.to_json(), target)
    assert json.loads(target.read_text())["score"] == 5.0
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
    gradescope = to_gradescope(grade)
    assert gradescope["score"] == 5.0
    assert [t["visibility"] for t in gradescope["tests"]] == ["visible", "after_published"]


def test_gradescope_output_names_the_sandbox_and_only_the_instructor_reads_why_below_bubblewrap():
    report = fake_pytest_report(("public", "a", "passed", 1))
    exercises = tuple(score(report, ["attention"]))
    isolated = to_gradescope(GradeReport("sub", "all", "cpu", 1.0, torch.__version__, exercises, sandbox="bubblewrap"))
    assert "sandbox: bubblewrap" in isolated["output"] and isolated["extra_data"] == {"sandbox": "bubblewrap"}
    for tier, says in (("user", "separate unprivileged user"), ("none", "WITHOUT isolation")):
        below = to_gradescope(GradeReport("sub", "all", "cpu", 1.0, torch.__version__, exercises, sandbox=tier))
        # Students read the tier's name where bubblewrap's would be, nothing more; the why is stored for the instructor.
        assert below["output"] == isolated["output"].replace("bubblewrap", tier), below["output"]
        assert says in below["extra_data"]["notice"] and below["stdout_visibility"] == "hidden", below
        exercism = to_exercism(GradeReport("sub", "all", "cpu", 1.0, torch.__version__, exercises, sandbox=tier))
        assert exercism["sandbox"] == tier



def test_gradescope_output_reads_in_the_courses_language():
    """A Chinese autograder's students read its first lines in Chinese, as the feedback below them."""
    from grader import lang

    report = GradeReport("sub", "all", "cpu", 1.0, torch.__version__, (), sandbox="bubblewrap")
    lang.use("zh")
    try:
        output = to_gradescope(report)["output"]
    finally:
        lang.use("en")
    assert output == "0 / 0 分（全部测试，cpu，沙箱：bubblewrap）", output
    assert to_gradescope(report)["output"] == "0 / 0 points (all suite, cpu, sandbox: bubblewrap)"


def test_exercism_results_name_each_test_its_task_and_the_overall_status():
    mixed = fake_pytest_report(("public", "a", "passed", 1), ("hidden", "b", "failed", 1))
    grade = GradeReport("sub", "all", "cpu", 1.0, torch.__version__, tuple(score(mixed, ["attention"])))
    results = to_exercism(grade)
    assert results["version"] == 3 and results["status"] == "fail" and results["message"] is None
    assert [(t["status"], t["task_id"]) for t in results["tests"]] == [("pass", 1), ("fail", 1)]
    passing = fake_pytest_report(("public", "a", "passed", 1))
    grade = GradeReport("sub", "all", "cpu", 1.0, torch.__version__, tuple(score(passing, ["attention"])))
    assert to_exercism(grade)["status"] == "pass"


# --- the worker --------------------------------------------------------------------------------

PROBE = textwrap.dedent('''
    import ctypes, os, socket, torch

    def attention(query, key, value, dropout=None, mask=None):
        if query.shape[-2] == 5:
            ctypes.string_at(0)  # crash on this one input only
        p = (query @ key.transpose(-2, -1) / query.shape[-1] ** 0.5).softmax(-1)
        return p @ value, p

    def facts(paths):
        seen = {p: os.path.exists(p) for p in paths}
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=2)
            network = True
        except OSError:
            network = False
        return {"seen": seen, "network": network, "cwd": os.getcwd()}
''')


@pytest.fixture
def probe_session(tmp_path):
    (tmp_path / "attention.py").write_text(PROBE)
    session = GradingSession.open(tmp_path, device="cpu", limits=Limits(call_timeout_s=30))
    yield session
    session.close()


def test_a_crash_fails_one_call_and_the_next_call_runs_on_a_fresh_worker(probe_session):
    impl = probe_session.impl()
    q = torch.randn(2, 5, 4)
    with pytest.raises(WorkerCrash, match="SIGSEGV"):
        impl.attention.attention(q, q, q)
    q = torch.randn(2, 6, 4)
    output, _ = impl.attention.attention(q, q, q)
    assert output.shape == (2, 6, 4) and probe_session.connection.generation == 2


def test_a_tests_objects_are_dropped_after_it_but_modules_are_looked_up_once(probe_session):
    connection, impl = probe_session.connection, probe_session.impl()
    facts = impl.attention.facts
    layer = impl.torch.nn.Linear(2, 2)  # lives in the worker, behind a handle
    connection.release_all()  # what the impl fixture does after each test
    assert impl.attention.facts is facts  # no second lookup
    with pytest.raises(SubmissionFailure, match="no longer exists"):
        layer(torch.zeros(2))  # the release went with this request
    assert impl.attention.facts(["/"])["seen"] == {"/": True}


def test_student_exceptions_name_the_file_and_line(tmp_path):
    (tmp_path / "attention.py").write_text("def attention(q, k, v, dropout=None, mask=None):\n    return 1 / 0\n")
    session = GradingSession.open(tmp_path, device="cpu")
    try:
        with pytest.raises(SubmissionFailure, match=r"ZeroDivisionError.*attention.py, line 2"):
            session.impl().attention.attention(torch.zeros(1), torch.zeros(1), torch.zeros(1))
    finally:
        session.close()


@needs_bwrap
def test_the_sandbox_hides_the_kit_and_the_network(probe_session):
    kit = [str(REPO / "solutions" / "attention.py"), str(REPO / "tests"), str(REPO / "grader"), str(REPO)]
    facts = probe_session.impl().attention.facts([*kit, "/tmp", "/sandbox/exercises/attention.py"])
    assert facts["seen"] == {**{p: False for p in kit}, "/tmp": True, "/sandbox/exercises/attention.py": True}
    assert facts["network"] is False


def test_without_bubblewrap_the_grader_warns_and_still_grades(tmp_path):
    env = {**os.environ, "GRADER_SANDBOX": "none", "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    run = subprocess.run([sys.executable, "-m", "grader", "check", "attention", "--submission", "solutions",
                          "--json", str(tmp_path / "r.json")], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 10 and report["sandbox"] == "none"
    assert "warning: sandbox: none, not bubblewrap (no bubblewrap: GRADER_SANDBOX=none is set" in run.stderr


def test_without_bubblewrap_setsid_children_are_still_killed(tmp_path):
    marker = "KIT_ENGINE_ESCAPE_MARKER"
    (tmp_path / "attention.py").write_text(textwrap.dedent(f'''
        import os, subprocess, sys

        def attention(query, key, value, dropout=None, mask=None):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"],
                             start_new_session=True)
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
                os._exit(0)
            raise ValueError("no attention here")
    '''))
    env = {**os.environ, "GRADER_SANDBOX": "none", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "grader", "check", "attention", "--submission", str(tmp_path)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    for pid in survivors:
        os.kill(int(pid.name), 9)
    assert not survivors, f"{len(survivors)} escaped processes outlived the grader"


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False



# --- the zygote: one sandbox, many submissions, one after another -------------------------------


def _survivors(marker: str) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]


def _session_on(zygote: Sandbox, folder: Path) -> GradingSession:
    loaded = load(folder)
    return GradingSession.around(folder, loaded, zygote, zygote.connect(loaded), device="cpu")


def test_what_a_submission_leaves_running_dies_before_the_next_one_is_staged(tmp_path):
    marker = "KIT_ZYGOTE_LEFTOVER_MARKER"
    (tmp_path / "attention.py").write_text(textwrap.dedent(f'''
        import subprocess, sys

        def attention(query, key, value, dropout=None, mask=None):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"],
                             start_new_session=True)
            raise ValueError("no attention here")
    '''))
    # Unconfined workers, so that the leftover can start at all: the clean-up must hold even then.
    zygote = Sandbox(device="cpu", limits=Limits(), tier=tiers.choose().tier, confine=False)
    try:
        first = _session_on(zygote, tmp_path)
        with pytest.raises(SubmissionFailure, match="no attention here"):
            first.impl().attention.attention(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2))
        deadline = time.monotonic() + 10
        while not _survivors(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _survivors(marker), ("the leftover process never started: this test proves nothing. The worker "
                                    f"printed: {first.connection.printed_since((0, 0))!r}")
        first.close()
        second = _session_on(zygote, REPO / "solutions")
        assert not _survivors(marker), "a process of the previous submission is still running"
        q = torch.randn(2, 3, 4)
        output, _ = second.impl().attention.attention(q, q, q)
        assert output.shape == (2, 3, 4)
        second.close()
    finally:
        zygote.close()
        for pid in _survivors(marker):
            os.kill(pid, 9)


def test_a_worker_cannot_signal_its_zygote_and_a_zygote_killed_costs_one_call(tmp_path):
    (tmp_path / "attention.py").write_text(textwrap.dedent('''
        import os, signal
        import torch

        def attention(query, key, value, dropout=None, mask=None):
            if query.shape[0] == 1:
                os.kill(os.getppid(), signal.SIGKILL)  # the zygote that forked this worker
            p_attn = torch.softmax(query @ key.transpose(-2, -1) / query.shape[-1] ** 0.5, dim=-1)
            return p_attn @ value, p_attn
    '''))
    session = GradingSession.open(tmp_path, device="cpu")
    try:
        impl = session.impl()
        with pytest.raises(SubmissionFailure, match="PermissionError"):
            impl.attention.attention(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
        q = torch.randn(2, 3, 4)
        output, _ = impl.attention.attention(q, q, q)
        assert output.shape == (2, 3, 4) and len(session.workers.owned) == 1, "the zygote was signalled"
        # The sandbox dies under the worker (the machine's doing, not the submission's): one call fails.
        zygote = psutil.Process(session.workers.sandbox.process.pid)
        for process in [zygote, *zygote.children(recursive=True)]:
            process.kill()
        with pytest.raises(WorkerCrash):
            impl.attention.attention(q, q, q)
        output, _ = impl.attention.attention(q, q, q)
        assert output.shape == (2, 3, 4) and len(session.workers.owned) == 2
    finally:
        session.close()


def test_a_folder_and_its_zip_are_graded_from_the_same_files(tmp_path):
    """A stray attention.py at the top and all nine in sub/: the folder, as its zip, is graded from sub/ (the fullest
    folder; a tie goes to the shallowest, then to exercises/)."""
    folder = tmp_path / "student"
    (folder / "sub").mkdir(parents=True)
    (folder / "attention.py").write_text("# stray\n")
    for name in SUBMISSION_FILES:
        (folder / "sub" / name).write_text(f"# {name}\n")
    archive = tmp_path / "student.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(folder.rglob("*.py")):
            zipped.write(path, str(path.relative_to(tmp_path)))
    assert load(folder).files == load(archive).files and load(folder).files["attention.py"] == b"# attention.py\n"
    # The student may have meant the one at the top (newer work beside an old full copy): each says it was left out.
    assert any(note.startswith("attention.py at the top not graded: the folder sub ") for note in load(folder).notes)
    assert any(note.startswith("attention.py at student not graded: the folder student/sub ")
               for note in load(archive).notes), load(archive).notes
    # A folder between the top and the one graded is read as the top is, in a folder as in its zip.
    nested = tmp_path / "nested"
    (nested / "a" / "b").mkdir(parents=True)
    (nested / "a" / "attention.py").write_text("# stray\n")
    for name in SUBMISSION_FILES:
        (nested / "a" / "b" / name).write_text(f"# {name}\n")
    with zipfile.ZipFile(tmp_path / "nested.zip", "w") as zipped:
        for path in sorted(nested.rglob("*.py")):
            zipped.write(path, str(path.relative_to(nested)))
    for submission in (nested, tmp_path / "nested.zip"):
        assert [note for note in load(submission).notes if "not graded" in note] == [
            "attention.py at a not graded: the folder a/b holds more exercise files and is the one graded (move or "
            "delete the copy you do not mean)"], load(submission).notes
    # Folder names are the submission's text: a line break in one cannot start a line of the grader's own.
    with zipfile.ZipFile(tmp_path / "forged.zip", "w") as zipped:
        zipped.writestr("a\n✔ 100/100/attention.py", "# stray\n")
        for name in SUBMISSION_FILES:
            zipped.writestr(f"a\n✔ 100/100/b/{name}", f"# {name}\n")
    notes = [note for note in load(tmp_path / "forged.zip").notes if "not graded" in note]
    assert len(notes) == 1 and "\n" not in notes[0] and "a\\n✔ 100/100" in notes[0], notes
    (folder / "exercises").mkdir()
    for name in SUBMISSION_FILES:
        (folder / "exercises" / name).write_text("# chosen\n")
    assert load(folder).files["attention.py"] == b"# chosen\n"  # as full as sub/, and named exercises/


def test_the_classroom_job_summary_reads_in_the_courses_language():
    """The release workflow's job summary and Classroom's points (grader/view/classroom.py): Chinese in a Chinese
    course, the same table in English; a report graded without isolation gives Classroom nothing."""
    from grader import lang
    from grader.view import classroom

    report = {"score": 7.5, "max_score": 10, "suite": "public", "sandbox": "bubblewrap", "torch": "2.13.0+cpu",
              "exercises": [{"id": "attention", "score": 7.5, "max_score": 10, "files": ["attention.py"],
                             "tests": [{"outcome": "passed"}, {"outcome": "failed"}], "blocked_by": []}]}
    english = classroom.summary(report)
    assert english.startswith("### 7.5 / 10 points\n\n| exercise | points | tests passed | blocked by |\n"), english
    assert "| attention | 7.5 / 10 | 1 / 2 |  |\n" in english and "public suite, sandbox: bubblewrap" in english
    lang.use("zh")
    try:
        chinese, points = classroom.summary(report), classroom.result(report)
        unisolated = classroom.summary({**report, "sandbox": "none"})
    finally:
        lang.use("en")
    assert chinese.startswith("### 7.5 / 10 分\n\n| 练习 | 得分 | 通过的测试 | 受阻于 |\n"), chinese
    assert "公开测试" in chinese, chinese
    assert points["tests"][0]["message"] == "7.5 / 10 分" and points["tests"][0]["score"] == 7.5, points
    assert "没有交给 GitHub Classroom" in unisolated and classroom.result({**report, "sandbox": "none"}) is None


def test_a_report_written_into_a_folder_that_is_gone_makes_nothing(tmp_path):
    """A batch slot's grading child writes into the folder its batch made for it, never made again: after a killed
    batch's rerun removed it, a child that outlived the batch leaves nothing in the out folder."""
    gone = tmp_path / ".partial-x" / "report.json"
    with pytest.raises(FileNotFoundError):
        write_json({"score": 1}, gone, make_folder=False)
    assert list(tmp_path.iterdir()) == []
    write_json({"score": 1}, gone)  # anyone else's report makes its folder
    assert json.loads(gone.read_text()) == {"score": 1}


def test_a_memory_budget_bounds_a_fresh_worker_above_its_zygote_and_only_that_worker(tmp_path):
    """What `@pytest.mark.memory_budget` stands on: the worker started while `memory_above` is set may hold at most that
    much above its zygote, private (RLIMIT_DATA) or shared (RLIMIT_AS: a MAP_SHARED region is not data); the next
    worker started without it has the limits' own memory again."""
    (tmp_path / "attention.py").write_text(
        "import mmap\n"
        "import torch\n\n\n"
        "def grab(mib):\n"
        "    return float(torch.ones(mib * 2**18).sum())  # float32: 4 bytes each\n\n\n"
        "def grab_shared(mib):\n"
        "    region = mmap.mmap(-1, mib * 2**20, flags=mmap.MAP_SHARED)\n"
        "    region.write(b'x' * (mib * 2**20))\n"
        "    return mib\n")
    session = GradingSession.open(tmp_path, device="cpu")
    try:
        if not session.workers.sandbox.bounds_memory:
            pytest.skip("spawned workers keep no memory budget (the test is skipped there, worth no points)")
        connection, impl = session.connection, session.impl()
        assert impl.attention.grab(256) == 256 * 2**18  # the limits' own 4 GiB
        connection.memory_above = 128 * 2**20
        connection.close(wait=False)
        assert impl.attention.grab(32) == 32 * 2**18
        for grab in (impl.attention.grab, impl.attention.grab_shared):
            with pytest.raises(SubmissionFailure) as failed:
                grab(256)
            assert "memory" in failed.value.causes or failed.value.kind in ("MemoryError", "OSError"), failed.value
        assert "128 MiB" in str(failed.value), failed.value  # the test's budget, not the worker's 4 GiB
        connection.memory_above = None
        connection.close(wait=False)
        assert impl.attention.grab(256) == 256 * 2**18
    finally:
        session.close()
