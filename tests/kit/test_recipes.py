"""The deployment recipes, run as written: Gradescope's `setup.sh` then `run_autograder`, and the GitHub
Actions workflow's steps in order, never a copy of their commands.

Each rehearsal deploys the way the real one happens: as root for Gradescope (the bundle made
root's alone by `setup.sh`, Python in a venv under /tmp), as an unprivileged runner for Actions, with
a `bwrap` first on PATH that fails the way Docker's (Gradescope) or AppArmor's (ubuntu-24.04) does.
What cannot happen here is stood in for, and only that: `GRADER_SETUP_SKIP_SYSTEM=1` skips
`setup.sh`'s apt-get and torch download (this machine has both), and a `sudo` on PATH takes the
workflow's two system commands (apt-get, which has nothing to install; sysctl, which would change the
machine) and lifts the stand-in AppArmor rule instead. The workflow's actions are stood in for by what they
do here (the checkout clones, setup-python makes a venv); GitHub Classroom's reporter by what it reads: each
runner's `<ID>_RESULTS`, base64-encoded JSON, whose tests' scores it adds up.

Slow by nature (a venv and `pip install -e` per deployment, each a minute or less): each deployment is
made once per module and graded at every tier it must hold at.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import without_timings
from deploy import AS_NOBODY, NOBODY, Gradescope, make_python, plain_environment, program

REPO = Path(__file__).resolve().parents[2]
# Ubuntu 24.04's AppArmor refuses an unprivileged user namespace until its sysctl is turned off.
APPARMOR_BWRAP = """#!/bin/sh
[ -e "{lifted}" ] && exec {bwrap} "$@"
echo 'bwrap: setting up uid map: Permission denied' >&2
exit 1
"""
RUNNER_SUDO = """#!/bin/sh
echo "sudo $*" >> "{log}"
case "$1" in
    apt-get) exit 0 ;;  # bubblewrap is installed on this machine already
    sysctl) [ "$*" = "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" ] || exit 1
            [ "{lifts}" = yes ] && touch "{lifted}"; exit 0 ;;
    *) echo "sudo: $* is not rehearsed" >&2; exit 1 ;;
esac
"""
# Slow by nature: a deployment is a venv, a pip install and gradings (about a minute in all).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not shutil.which("bwrap") or not shutil.which("setpriv"),
                                                  reason="the rehearsals need bubblewrap and setpriv (util-linux)")]


def test_setup_sh_locks_the_bundle_and_grades_the_reference_once(gradescope: Gradescope):
    source = gradescope.root / "source"
    for look in (["ls", str(source)], ["cat", str(source / "solutions" / "attention.py")],
                 ["cat", str(source / "tests" / "hidden" / "test_attention.py")]):
        seen = subprocess.run([*AS_NOBODY, *look], capture_output=True, text=True, timeout=30)
        assert seen.returncode != 0, f"uid {NOBODY} can run `{' '.join(look)}` after setup.sh:\n{seen.stdout[:500]}"
    assert "10/10" in gradescope.setup_output and "sandbox:" in gradescope.setup_output, gradescope.setup_output[-2000:]


def test_setup_sh_stops_in_one_line_where_the_rehearsals_python_lacks_the_pinned_torch(gradescope: Gradescope,
                                                                                      tmp_path: Path):
    """With GRADER_SETUP_SKIP_SYSTEM=1 and no torch, or another one, setup.sh stops before its `pip install -e` could
    resolve one (PyPI's newest, with GB of CUDA libraries): one line, naming the pin and how to install it. The venv
    has no pip of its own, so that a setup.sh that goes on cannot download anything."""
    python = tmp_path / "image python"  # a space in the path, as a user's may have
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(python)], check=True, timeout=120)
    pin = re.search(r"pip install torch==(\S+) --index-url", (REPO / "grader" / "recipes" / "setup.sh").read_text())[1]
    env = plain_environment(AUTOGRADER_ROOT=str(tmp_path / "autograder"), GRADER_SETUP_SKIP_SYSTEM="1",
                            PATH=f"{python / 'bin'}{os.pathsep}{os.environ['PATH']}")
    site_packages = next(python.glob("lib/python3*/site-packages"))
    for version in (None, "2.14.1+cu130"):
        if version:  # a torch that is not the pin, as an unpinned `pip install` leaves
            program(site_packages / "torch", "__init__.py", f"__version__ = {version!r}\n")
        done = subprocess.run(["bash", str(gradescope.root / "source" / "setup.sh")], capture_output=True, text=True,
                              timeout=60, env=env)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, f"exit {done.returncode}:\n{done.stderr}"
        found = f"torch {version}" if version else "no torch"
        assert f"torch {pin} is needed in {python / 'bin' / 'python3'}, which has {found};" in done.stderr, done.stderr
        assert f" -m pip install torch=={pin} --index-url https://download.pytorch.org/whl/cpu\n" in done.stderr


@pytest.mark.parametrize("tier", ["bubblewrap", "user"])
def test_run_autograder_grades_the_reference_in_full_and_the_stubs_at_zero(gradescope: Gradescope, tier: str):
    refused = tier == "user"  # a root grader whose bwrap cannot create namespaces, as in Docker
    status, results, stderr = gradescope.run(REPO / "solutions", bwrap_refused=refused)
    assert gradescope.sandbox() == tier, f"{results['output']}\n{stderr[-2000:]}"
    assert status == 0 and results["score"] == 100, f"exit {status}: {results['output']}\n{stderr[-2000:]}"
    # Students read the tier in the first line alone; why it is not bubblewrap is the instructor's to read: in the
    # results' extra_data, and in run_autograder's own output, which Gradescope shows the instructor alone.
    lines = results["output"].splitlines()
    assert f"sandbox: {tier}" in lines[0] and not [line for line in lines[1:] if re.search("sandbox|isolat|WARN", line)]
    assert results["stdout_visibility"] == "hidden" and results["extra_data"]["sandbox"] == tier, results
    assert ("notice" in results["extra_data"]) == refused == ("not bubblewrap" in stderr), (results, stderr[-2000:])

    status, results, stderr = gradescope.run(REPO / "exercises", bwrap_refused=refused)
    assert gradescope.sandbox() == tier and status == 0, f"exit {status}: {results['output']}\n{stderr[-2000:]}"
    assert results["score"] == 0 and results["tests"], results["output"]


def test_a_regrade_on_gradescope_gives_the_same_results(gradescope: Gradescope, tmp_path: Path):
    """Gradescope's Regrade runs run_autograder again on the same files: the same results.json but for the time it
    took, its seed in extra_data. The submission has a mistake whose messages quote drawn values (attention without
    the 1/sqrt(d_k) scale), so that a draw that changed would show."""
    submission = tmp_path / "submission"
    shutil.copytree(REPO / "solutions", submission, ignore=shutil.ignore_patterns("mistakes", "__*"))
    source = (submission / "attention.py").read_text()
    scaled = re.sub(r" / math\.sqrt\(d_k\)", "", source)
    assert scaled != source, "the reference's attention no longer divides by math.sqrt(d_k)"
    (submission / "attention.py").write_text(scaled)
    first, second = (gradescope.run(submission, bwrap_refused=False) for _ in range(2))
    assert first[0] == second[0] == 0 and first[1]["score"] < 100, f"{first[1]['output']}\n{first[2][-2000:]}"
    assert isinstance(first[1]["extra_data"].get("seed"), int), first[1]["extra_data"]
    same = [without_timings({k: v for k, v in results.items() if k != "execution_time"}) for _, results, _ in
            (first, second)]
    assert same[0] == same[1]


@pytest.mark.parametrize("tier", ["bubblewrap", "user", "none"])
def test_a_kit_folder_locked_by_chmod_go_rwx_grades_at_every_tier(gradescope: Gradescope, tier: str, tmp_path: Path):
    """What the sandbox runs is staged with modes of its own: the bundle setup.sh made root's alone, under a
    umask of 077, still grades in full at every tier (each runs the submission as uid 65534 here)."""
    env = plain_environment(PATH=os.pathsep.join([*([str(gradescope.docker_bwrap)] if tier != "bubblewrap" else []),
                                                   str(gradescope.python), os.environ["PATH"]]),
                            **({"GRADER_SANDBOX": "none"} if tier == "none" else {}))
    report = tmp_path / "report.json"
    done = subprocess.run(["bash", "-c", 'umask 077 && exec python3 -m grader check attention --submission "$1" '
                           '--json "$2"', "bash", str(REPO / "solutions"), str(report)],
                          cwd=gradescope.root / "source", env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-2000:]}"
    graded = json.loads(report.read_text())
    assert (graded["sandbox"], graded["score"]) == (tier, 10), (graded["sandbox"], graded["score"], done.stderr[-2000:])


def test_without_landlock_another_readable_checkout_keeps_the_user_tier_off(gradescope: Gradescope, tmp_path: Path):
    """The image's Python also sees this checkout's editable install (its site-packages names the folder): without
    Landlock a submission at the user tier could read that checkout's solutions, so the tier is not claimed."""
    if not os.stat(REPO).st_mode & 0o005:
        pytest.skip(f"{REPO} is not readable by other users: nothing to hide")
    env = plain_environment(PATH=os.pathsep.join([str(gradescope.docker_bwrap), str(gradescope.python),
                                                  os.environ["PATH"]]), GRADER_LANDLOCK="off")
    done = subprocess.run(["python3", "-m", "grader", "check", "attention", "--submission", str(REPO / "solutions"),
                           "--json", str(tmp_path / "report.json")], cwd=gradescope.root / "source", env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and not (tmp_path / "report.json").exists(), (done.returncode, done.stderr[-2000:])
    # This checkout, or the one this Python's editable install points at (a worktree's run, say).
    named = re.search(r"no user tier: (/\S+) is readable by other users", done.stderr)
    assert named and (Path(named[1]) / "solutions").is_dir(), done.stderr
    assert not Path(named[1]).is_relative_to(gradescope.root), done.stderr


def test_run_autograder_fails_loudly_when_the_grader_writes_nothing(gradescope: Gradescope):
    status, results, stderr = gradescope.run(None, bwrap_refused=False)  # Gradescope never left a submission
    assert status == 1 and results["score"] == 0 and results["visibility"] == "visible", results
    assert results["output"].startswith("NOT GRADED: grader: error: submission"), results["output"]
    assert "NOT GRADED" in stderr


def test_run_autograder_refuses_to_grade_without_isolation(gradescope: Gradescope):
    status, results, _ = gradescope.run(REPO / "solutions", bwrap_refused=True, GRADER_SANDBOX="none",
                                        GRADER_EXTRA_ARGS="--quick attention")
    assert status == 1 and results["score"] == 0 and results["tests"] == [], results
    # The grader refuses by itself (NOT GRADED, with its reason) or grades unisolated and run_autograder refuses.
    assert results["output"].startswith(("REFUSED", "NOT GRADED")), results["output"]
    assert gradescope.sandbox() in (None, "none")


# The GitHub Actions workflow that `grader release` writes, its steps run in order in a clone of a student
# release, by an unprivileged runner whose bubblewrap AppArmor refuses until the workflow's sysctl step.


@dataclass
class Job:
    succeeded: bool
    steps: list[tuple[str, str]]  # (step name, "success" | "failure" | "skipped")
    log: str
    report: dict[str, Any] | None
    sudo: list[str]
    summary: str  # what the steps wrote to $GITHUB_STEP_SUMMARY
    classroom: dict[str, Any] | None  # the results GitHub Classroom's reporter decoded, by runner; None if it never ran


# The `if:` conditions the rehearsal evaluates: a status function, and a step's output being set.
STATUS = re.compile(r"always\(\)|success\(\)|failure\(\)")
OUTPUT_SET = re.compile(r"steps\.([\w-]+)\.outputs\.([\w-]+) != ''")
EXPRESSION = re.compile(r"\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}")


def runs(condition: Any, failed: bool, outputs: dict[str, dict[str, str]]) -> bool:
    """Whether a step with `if: condition` runs, as Actions decides: success() unless a status function says
    otherwise. Only the forms the workflow uses are known; another one fails the rehearsal, to be taught."""
    terms = [term.strip() for term in str(condition or "").split("&&") if term.strip()]
    verdict = not failed if not any(STATUS.fullmatch(term) for term in terms) else True
    for term in terms:
        if term in ("always()", "success()", "failure()"):
            verdict &= {"always()": True, "success()": not failed, "failure()": failed}[term]
        elif match := OUTPUT_SET.fullmatch(term):
            verdict &= outputs.get(match[1], {}).get(match[2], "") != ""
        else:
            raise AssertionError(f"the rehearsal does not know the condition {term!r}: teach it, do not skip it")
    return verdict


def step_outputs(text: str) -> dict[str, str]:
    """What a step wrote to $GITHUB_OUTPUT: `name=value` lines, and `name<<DELIMITER` blocks."""
    found, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            found[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def classroom_reporter(step: dict[str, Any], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    """classroom-resources/autograding-grading-reporter@v1, as its src/main.js and src/notify-classroom.js read:
    each runner's `<ID upper-cased>_RESULTS`, base64-encoded JSON; the points are its tests' scores added up over
    the runners with a max_score, noticed as `Points X/Y`; the step fails when a runner's status is fail or error."""
    results = {}
    for runner in filter(None, re.split(r"[\s,]", step["with"]["runners"])):
        results[runner] = json.loads(base64.b64decode(env[f"{runner.upper()}_RESULTS"], validate=True))
    scored = [result for result in results.values() if result.get("max_score")]
    points = sum(test["score"] for result in scored for test in result["tests"])
    notice = f"::notice title=Autograding complete::Points {points:g}/{sum(r['max_score'] for r in scored):g}\n"
    failed = any(result["status"] in ("fail", "error") for result in results.values())
    return subprocess.CompletedProcess([], int(failed), notice, ""), results


def run_workflow(workflow: Path, repository: Path, base: Path, *, sysctl_lifts: bool, branch: str = "main") -> Job:
    """Run the job of `workflow` as Actions would on ubuntu-24.04, in a clone of `branch` of `repository` made under
    `base`."""
    definition = yaml.safe_load(workflow.read_text())
    (name, job), = definition["jobs"].items()
    home, workspace, runner_python, temporary = base / "home", base / "workspace", base / "python", base / "tmp"
    files = base / "files"  # each step's $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY
    # The runner's own: it runs as an unprivileged user. Its TMPDIR too: here that user is uid 65534, whose files
    # in /tmp a grader at the user or none tier running beside this test (pytest-xdist) removes as a sandbox's
    # leftovers; a real runner is a user of its own, and its files in /tmp are safe from that.
    for folder in (home, workspace, runner_python, temporary, files):
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
    lifted, sudo_log, tools = home / "apparmor-lifted", home / "sudo.log", base / "tools"  # `sudo` runs as the runner
    program(tools, "bwrap", APPARMOR_BWRAP.format(lifted=lifted, bwrap=shutil.which("bwrap")))
    program(tools, "sudo", RUNNER_SUDO.format(log=sudo_log, lifted=lifted, lifts="yes" if sysctl_lifts else "no"))
    python: Path | None = None
    declared = {**definition.get("env", {}), **job.get("env", {})}
    environment = plain_environment(HOME=str(home), CI="true", GITHUB_ACTIONS="true", TMPDIR=str(temporary),
                                    **{k: str(v) for k, v in declared.items()})
    outcomes: list[tuple[str, str]] = []
    log: list[str] = []
    outputs: dict[str, dict[str, str]] = {}
    summary: list[str] = []
    classroom: dict[str, Any] | None = None
    failed = False
    for number, step in enumerate(job["steps"]):
        label = step.get("name") or step.get("uses") or f"step {number}"
        if not runs(step.get("if"), failed, outputs):
            outcomes.append((label, "skipped"))
            continue
        path = os.pathsep.join([str(tools), *([str(python)] if python else []), "/usr/local/bin:/usr/bin:/bin"])
        output, step_summary = files / f"output-{number}", files / f"summary-{number}"
        for file in (output, step_summary):
            file.touch()
            os.chown(file, NOBODY, NOBODY)
        declared = {k: EXPRESSION.sub(lambda m: outputs.get(m[1], {}).get(m[2], ""), str(v))
                    for k, v in step.get("env", {}).items()}
        env = {**environment, **declared, "PATH": path, "GITHUB_OUTPUT": str(output),
               "GITHUB_STEP_SUMMARY": str(step_summary)}
        action = step.get("uses", "").split("@")[0]
        if action == "actions/checkout":
            done = subprocess.run([*AS_NOBODY, "git", "clone", "--quiet", "--branch", branch, str(repository),
                                   str(workspace)], env=env, cwd=base, capture_output=True, text=True, timeout=120)
        elif action == "actions/setup-python":
            python = make_python(runner_python, prefix=AS_NOBODY)
            done = subprocess.CompletedProcess([], 0, "", "")
        elif action == "actions/upload-artifact":
            kept = workspace / step["with"]["path"]
            done = subprocess.CompletedProcess([], 0, f"kept {kept}" if kept.is_file() else "no file to keep", "")
        elif action == "classroom-resources/autograding-grading-reporter":
            done, classroom = classroom_reporter(step, env)
        elif "run" in step:
            script = base / f"step-{number}.sh"
            script.write_text(step["run"])
            script.chmod(0o644)
            done = subprocess.run([*AS_NOBODY, "bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                  env=env, cwd=workspace, capture_output=True, text=True, timeout=600)
        else:
            raise AssertionError(f"the rehearsal does not know the action {step['uses']!r}: teach it, do not skip it")
        log.append(f"## {label} (exit {done.returncode})\n{done.stdout}{done.stderr}")
        outcomes.append((label, "success" if done.returncode == 0 else "failure"))
        failed |= done.returncode != 0
        if "id" in step:
            outputs[step["id"]] = step_outputs(output.read_text())
        summary.append(step_summary.read_text())
    report_path = workspace / "grader-report.json"
    return Job(not failed, outcomes, "\n".join(log),
               json.loads(report_path.read_text()) if report_path.is_file() else None,
               sudo_log.read_text().splitlines() if sudo_log.is_file() else [], "".join(summary), classroom)


@pytest.fixture(scope="module")
def student_repository() -> Iterator[Path]:
    """A student release as a git repository, which the workflow's checkout clones: its branch main is the release,
    its branch reference the next push of a student who finished (the reference solutions in exercises/)."""
    base = Path(tempfile.mkdtemp(prefix="kit-actions-"))
    base.chmod(0o755)
    try:
        repository = base / "student"
        release = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(repository)], cwd=REPO,
                                 capture_output=True, text=True, timeout=120,
                                 env=plain_environment(PYTHONPATH=str(REPO)))
        assert release.returncode == 0, release.stderr
        git = ("git", "-c", "user.name=kit", "-c", "user.email=kit@example.invalid", "-C", str(repository))
        for command in (("init", "--quiet", "--initial-branch", "main"), ("add", "-A"),
                        ("commit", "--quiet", "-m", "release"), ("checkout", "--quiet", "-b", "reference")):
            subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)
        for solution in (REPO / "solutions").glob("*.py"):
            if solution.name != "__init__.py" and (repository / "exercises" / solution.name).is_file():
                shutil.copyfile(solution, repository / "exercises" / solution.name)
        for command in (("commit", "--quiet", "-am", "done"), ("checkout", "--quiet", "main")):
            subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(repository)], check=True)  # git's safe.directory
        yield repository
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_release_workflow_is_named_as_github_classroom_finds_it(student_repository: Path):
    """The reporter's points reach Classroom only from a workflow named "Autograding Tests" whose one job is
    run-autograding-tests, allowed to write checks (classroom-resources/autograding-grading-reporter's README); and
    it grades a push once: no pull_request, which grades the same commit again."""
    definition = yaml.safe_load((student_repository / ".github" / "workflows" / "grade.yml").read_text())
    assert definition["name"] == "Autograding Tests" and list(definition["jobs"]) == ["run-autograding-tests"]
    assert "name" not in definition["jobs"]["run-autograding-tests"], "the check run must keep the job's id as its name"
    assert definition["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    assert "push" in definition[True] and "pull_request" not in definition[True], definition[True]  # YAML 1.1: on
    cached = next(step for step in definition["jobs"]["run-autograding-tests"]["steps"]
                  if step.get("uses", "").startswith("actions/setup-python"))["with"]
    assert cached["cache"] == "pip" and "pyproject.toml" in cached["cache-dependency-path"], cached


@pytest.mark.parametrize(("sysctl_lifts", "branch"), [(True, "main"), (True, "reference"), (False, "reference")],
                         ids=["apparmor-lifted-stubs", "apparmor-lifted-reference", "apparmor-stays-reference"])
def test_the_release_workflow_runs_as_written_on_an_ubuntu_runner(student_repository: Path, sysctl_lifts: bool,
                                                                  branch: str):
    base = Path(tempfile.mkdtemp(prefix="kit-runner-"))
    base.chmod(0o755)
    try:
        job = run_workflow(student_repository / ".github" / "workflows" / "grade.yml", student_repository, base,
                           sysctl_lifts=sysctl_lifts, branch=branch)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in job.sudo, job.sudo
    assert job.report is not None, f"the job wrote no report: {job.steps}\n{job.log[-3000:]}"
    full = branch == "reference"
    assert job.report["suite"] == "public" and job.report["score"] == (100 if full else 0), job.report["score"]
    # The job summary: the score, and a row per exercise with its points and its tests passed.
    assert f"### {job.report['score']:g} / 100 points\n" in job.summary, job.summary
    for exercise in job.report["exercises"]:
        passed = sum(test["outcome"] == "passed" for test in exercise["tests"])
        row = f"| {exercise['id']} | {exercise['score']:g} / {exercise['max_score']:g} | {passed} / "
        assert row in job.summary and (passed == len(exercise["tests"])) == full, (row, job.summary)
    reporter = ("Report the points to GitHub Classroom", "success" if sysctl_lifts else "skipped")
    assert reporter in job.steps, job.steps
    if sysctl_lifts:
        assert job.succeeded, f"{job.steps}\n{job.log[-3000:]}"
        assert job.report["sandbox"] == "bubblewrap", job.log[-3000:]
        assert "graded in the bubblewrap sandbox" in job.log
        # What GitHub Classroom's reporter read: one runner, one test per exercise, the report's points.
        assert job.classroom is not None and list(job.classroom) == ["grader"], job.classroom
        result = job.classroom["grader"]
        assert (result["version"], result["status"], result["max_score"]) == (1, "pass", 100), result
        assert [test["name"] for test in result["tests"]] == [e["id"] for e in job.report["exercises"]], result
        assert [test["score"] for test in result["tests"]] == [e["score"] for e in job.report["exercises"]], result
        assert {test["status"] for test in result["tests"]} == {"pass" if full else "fail"}, result
        assert all(test["line_no"] == 0 for test in result["tests"]), result  # else it prints "line undefined"
        assert f"::notice title=Autograding complete::Points {100 if full else 0}/100" in job.log
    else:  # bubblewrap stays refused: the grade step passes, the isolation check fails the job, loudly
        assert not job.succeeded and job.report["sandbox"] == "none", f"{job.steps}\n{job.log[-3000:]}"
        failed = [label for label, outcome in job.steps if outcome == "failure"]
        assert failed == ["Fail unless the grading was isolated"], job.steps
        assert "::error::graded without isolation (sandbox: none)" in job.log
        # Full points, graded unisolated: in the summary, said untrusted, and never given to GitHub Classroom.
        assert job.classroom is None and "GitHub Classroom was not given it" in job.summary, job.summary
    assert job.steps[-1] == ("Keep the report", "success"), job.steps  # `if: always()`: the report is kept
