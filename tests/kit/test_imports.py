"""A file that never finishes importing costs one timeout per grading (grader.intake.imports, Connection.import_module).

The exercise files an exercise imports are imported first, one at a time: when one of them hangs at its top level,
each exercise built on it is told so at once, and no test's hint about values is glued to an import that failed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.curriculum import SUBMISSION_FILES
from grader.intake.imports import exercise_imports

REPO = Path(__file__).resolve().parents[2]
MODULES = [file.removesuffix(".py") for file in SUBMISSION_FILES]


def test_only_what_runs_at_import_counts_however_it_is_imported():
    source = b"""
import torch
import exercises.masking
from exercises import attention
from exercises.sublayers import FeedForward
try:
    from .decoder import Decoder
except ImportError:
    from .encoder import Encoder
class Model:
    from . import head_attention
def later():
    from .transformer import Transformer
"""
    assert exercise_imports({"x.py": source}, MODULES) == {
        "x": ("masking", "attention", "sublayers", "decoder", "encoder", "head_attention")}


def test_the_stubs_import_what_the_curriculum_builds_on_and_a_file_that_does_not_parse_imports_nothing():
    files = {path.name: path.read_bytes() for path in (REPO / "exercises").glob("*.py")
             if path.name in SUBMISSION_FILES}
    found = exercise_imports({**files, "attention.py": b"def f(:\n"}, MODULES)
    assert found["multi_head_attention"] == ("masking",)
    assert found["transformer"] == ("decoder", "encoder", "positional_encoding")
    assert "attention" not in found


def test_an_endless_loop_at_import_costs_one_timeout_and_blocks_what_builds_on_it(grader_cli, grader_env, tmp_path):
    folder = tmp_path / "submission"
    shutil.copytree(REPO / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (folder / "masking.py").open("a", encoding="utf-8") as file:
        file.write("\nwhile True:\n    pass\n")
    run = grader_cli.run("check", "masking", "multi_head_attention", "encoder", "--submission", str(folder),
                         json_path=tmp_path / "report.json", env={**grader_env, "GRADER_CALL_TIMEOUT_S": "3"})
    assert run.returncode == 0, run.describe()
    tests = {e["id"]: e["tests"] for e in run.report["exercises"]}
    assert all(t["outcome"] != "passed" for tests_of in tests.values() for t in tests_of)
    assert all("in importing masking.py" in t["message"] and "Hint" not in t["message"] for t in tests["masking"])
    for exercise in ("multi_head_attention", "encoder"):
        messages = [t["message"] for t in tests[exercise]]
        assert all(f"importing {exercise}.py" not in m for m in messages), messages  # never timed out itself
        assert all(f"{exercise}.py was not imported, as it needs masking.py" in m for m in messages), messages


def test_a_file_nested_past_the_parsers_depth_is_read_as_one_that_does_not_parse():
    """`x = ----...1` 200,000 deep makes Python's parser raise MemoryError: on the trusted side that crashed the grader
    (exit 3) until every reading of a submission's source went through `syntax_tree`."""
    from grader.host import seeds
    from grader.intake import stubs
    from grader.intake.imports import syntax_tree
    from grader.judge.sources import parse

    deep = b"x = " + b"-" * 200_000 + b"1\n"
    assert syntax_tree(deep) is None and parse("masking", deep) is None
    assert exercise_imports({"masking.py": deep}, MODULES) == {}
    assert not stubs.untouched("masking.py", deep)
    assert seeds.grading_seed({"masking.py": deep}) != seeds.grading_seed({"masking.py": deep + b" "})


def test_a_file_too_deep_for_the_parser_is_told_so_not_that_it_ran_out_of_memory(grade, tmp_path: Path):
    """The worker's import of such a file raises MemoryError, which no memory limit caused: the failure says that
    Python cannot parse the file, not that the submission ran out of memory."""
    submission = tmp_path / "deep"
    submission.mkdir()
    (submission / "masking.py").write_bytes(b"x = " + b"-" * 200_000 + b"1\n")
    run = grade(submission, "masking")
    messages = [t["message"] for e in run.report["exercises"] for t in e["tests"] if t["message"]]
    assert messages and all("importing masking.py failed: Python cannot parse it, its code is nested too deeply "
                            "(MemoryError in the parser)" in m for m in messages), messages
    assert not any("memory" in m.replace("MemoryError", "") for m in messages), messages
