"""A regrade of the same files is the same report, byte for byte but for the timings (grader.host.seeds).

Every draw of a grading comes from a seed derived from the submission's files, the kit's version and the course's
salt (`GRADER_SALT`): the inputs the trusted side draws, the worker's own draws (dropout, weights a module starts
with) and the capstone's task. The report records it, and `grader check --seed` with it grades alike, on this
machine or another: here it reproduces what a batch wrote with a salt (test_cluster.py holds a cluster's reports,
seeds included, to a local batch's). The submission is one whose feedback carries drawn values: a dropout-rate
measurement's factors and the capstone's decoded examples.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import without_timings

from grader.host import seeds
from grader.intake.submission import load
from grader.judge import variants

REPO = Path(__file__).resolve().parents[2]
MISTAKES = {"sublayers": "adds_norm_x", "transformer": "decodes_the_source"}  # values drawn show in both messages
SALT = "a course's secret"


@pytest.fixture(scope="module")
def dave(tmp_path_factory) -> Path:
    """The reference solutions with two known mistakes swapped in, in a class of one."""
    folder = tmp_path_factory.mktemp("class") / "dave"
    folder.mkdir()
    for solution in (REPO / "solutions").glob("*.py"):
        if solution.name not in ("__init__.py", "config.py"):
            shutil.copyfile(solution, folder / solution.name)
    for exercise, name in MISTAKES.items():
        variants.write(next(m for m in variants.mistakes(exercise) if m.name == name), folder)
    return folder


def test_the_same_files_graded_twice_give_the_same_report(grader_cli, dave, tmp_path):
    first, second = (grader_cli.check(dave, tmp_path / f"{n}.json", "transformer") for n in (1, 2))
    assert first.returncode == 0 and second.returncode == 0, first.describe() + second.describe()
    assert first.report["seed"] == seeds.grading_seed(load(dave).files), first.report["seed"]
    drawn = [t["message"] for e in first.report["exercises"] for t in e["tests"] if "some came out" in t["message"]
             or "training steps" in t["message"]]
    assert drawn, "no message with drawn values: the comparison below would prove little"
    assert without_timings(first.report) == without_timings(second.report)


def test_a_batch_uses_the_course_salt_and_check_seed_reproduces_its_report(
        grader_cli, grader_env, dave, tmp_path):
    out = tmp_path / "grades"
    env = {**grader_env, seeds.SALT_VARIABLE: SALT}
    batch = grader_cli.run("batch", str(dave.parent), "--out", str(out), "--jobs", "1", env=env)
    assert batch.returncode == 0, batch.describe()
    written = json.loads((out / "dave.json").read_text())
    assert written["seed"] == seeds.grading_seed(load(dave).files, salt=SALT) != seeds.grading_seed(load(dave).files)
    again = grader_cli.run("check", *(e["id"] for e in written["exercises"]), "--submission", str(dave),
                           "--seed", str(written["seed"]), json_path=tmp_path / "again.json")
    assert again.returncode == 0, again.describe()
    assert without_timings(again.report["exercises"]) == without_timings(written["exercises"])


@pytest.mark.parametrize("seed", ["-1", "x", str(2**63)])
def test_a_seed_that_is_not_one_is_a_one_line_usage_error(grader_cli, dave, tmp_path, seed):
    run = grader_cli.run("check", "attention", "--submission", str(dave), "--seed", seed)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "seed" in run.stderr, run.describe()


def test_the_seed_follows_the_code_not_its_comments_or_layout():
    code = b"def f(x):\n    return x * 2\n"
    seed = seeds.grading_seed({"attention.py": code})
    assert seeds.grading_seed({"attention.py": b"# mine\n\ndef f(x):  # doubled\n    return x * 2\n"}) == seed
    assert seeds.grading_seed({"attention.py": code.replace(b"2", b"3")}) != seed
    assert seeds.grading_seed({"attention.py": code}, salt="s") != seed
    assert seeds.grading_seed({"attention.py": b"def f(:\n"}) != seeds.grading_seed({"attention.py": b"def f(: \n"})


def test_a_report_kept_follows_every_file_of_the_kit_that_decides_it(tmp_path):
    """What a batch's stored reports, a Dask worker's kit and the stored facets follow (`grader.sources`): the code,
    every message catalog (a rerun in Chinese after a translation changed writes the new words) and the files staged
    beside each submission; not a release's translated stubs, which its autograder bundle leaves out."""
    from grader import sources

    decisive = ["grader/a.py", "solutions/mistakes/b.py", "grader/locale/zh/LC_MESSAGES/grader.po",
                "tests/public/locale/zh/LC_MESSAGES/public.po", "tests/hidden/locale/zh/LC_MESSAGES/hidden.po",
                "solutions/mistakes/locale/zh/LC_MESSAGES/mistakes.po", "exercises/config.py"]
    stub = "grader/locale/zh/exercises/attention.py"
    for name in [*decisive, stub]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("before\n")
    assert [path.relative_to(tmp_path).as_posix() for path in sources.files(tmp_path)] == sorted(decisive)
    before = sources.digest(tmp_path)
    (tmp_path / stub).write_text("after\n")
    assert sources.digest(tmp_path) == before
    for name in decisive:
        (tmp_path / name).write_text("after\n")
        assert sources.digest(tmp_path) != before, name
        (tmp_path / name).write_text("before\n")
