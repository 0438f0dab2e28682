"""Isolation tiers below bubblewrap, as `grader batch` and `grader check` meet them on a root grader.

A `bwrap` that fails the way it does in Docker (namespaces refused) makes the grader fall to the
`user` tier; switching Landlock off (GRADER_LANDLOCK=off) with this checkout readable by everyone
makes the user tier unprovable too, which leaves `none`: refused unless the operator accepts it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="these tiers are a root grader's (Gradescope, Docker CI)")


@pytest.fixture(scope="module")
def no_namespaces(failing_bwrap) -> dict[str, str]:
    return {"GRADER_BWRAP": str(failing_bwrap)}


@pytest.fixture(scope="module")
def two_students(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("class")
    for name, source in (("alice", REPO / "solutions"), ("bob", REPO / "exercises")):
        (folder / name).mkdir()
        shutil.copyfile(source / "attention.py", folder / name / "attention.py")
    return folder


def _rows(out: Path) -> dict[str, dict[str, str]]:
    return {row["id"]: row for row in csv.DictReader((out / "grades.csv").open())}


def test_a_batch_in_the_user_tier_names_it_in_every_record(grader_cli, grader_env, no_namespaces, two_students,
                                                          tmp_path):
    out = tmp_path / "out"
    run = grader_cli.run("batch", str(two_students), "--out", str(out), "--jobs", "2", "--suite", "public",
                         env={**grader_env, **no_namespaces})
    assert run.returncode == 0, run.describe()
    rows = _rows(out)
    assert {name: (row["status"], row["sandbox"]) for name, row in rows.items()} == {
        "alice": ("graded", "user"), "bob": ("graded", "user")}, rows
    assert float(rows["alice"]["attention"]) == 10 and float(rows["bob"]["attention"]) == 0, rows
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sandboxes"] == {"user": 2}, summary
    report = json.loads((out / "alice.json").read_text())
    assert report["sandbox"] == "user" and report["warnings"][0].startswith("sandbox: user, not bubblewrap")


def test_a_batch_at_the_none_tier_is_refused_unless_accepted(grader_cli, grader_env, no_namespaces, two_students,
                                                            tmp_path):
    if not REPO.stat().st_mode & 0o005:
        pytest.skip(f"{REPO} is hidden from other users: the user tier holds even without Landlock")
    env = {**grader_env, **no_namespaces, "GRADER_LANDLOCK": "off"}
    out = tmp_path / "out"
    refused = grader_cli.run("batch", str(two_students), "--out", str(out), "--jobs", "1", "--suite", "public",
                             env=env)
    assert refused.returncode == 2, refused.describe()
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "--allow-unisolated" in lines[0], refused.stderr
    assert "readable by other users" in lines[0], lines[0]
    assert not (out / "grades.csv").exists()

    accepted = grader_cli.run("batch", str(two_students), "--out", str(out), "--jobs", "1", "--suite", "public",
                              "--allow-unisolated", env=env)
    assert accepted.returncode == 0, accepted.describe()
    rows = _rows(out)
    assert {name: (row["status"], row["sandbox"]) for name, row in rows.items()} == {
        "alice": ("graded", "none"), "bob": ("graded", "none")}, rows
    assert float(rows["alice"]["attention"]) == 10, rows
    assert "sandbox: none" in accepted.stderr or "none" in accepted.stdout, accepted.describe()
    # Root never runs a submission as root, even unisolated: its self-test reads the kit, not root's files.
    report = json.loads((out / "alice.json").read_text())
    assert any("can: " in w and f"read {REPO}" in w for w in report["warnings"]), report["warnings"]


def test_a_misspelt_grader_sandbox_is_a_usage_error(grader_cli, grader_env):
    run = grader_cli.run("check", "attention", "--submission", str(REPO / "solutions"),
                         env={**grader_env, "GRADER_SANDBOX": "bubblewarp"})
    assert run.returncode == 2, run.describe()
    assert "GRADER_SANDBOX='bubblewarp'" in run.stderr and "Traceback" not in run.stderr, run.stderr
