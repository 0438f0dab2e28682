"""The documentation keeps its promises: the README fits on a few screens, every link leads somewhere,
every command it shows is one the kit accepts, and docs/contributing.md's map of the kit's tests names every
test file, a row for every subpackage of grader/, and only files that exist.

Nothing here runs a command. `grader` commands are read by the real parser (`grader.cli.parse`) and
their exercises by the curriculum; every other command a README code block shows is listed in VOUCHED
with what runs it as written (a recipe, `.ci/run`) and a cheap check that it still does. In prose
(inline code), a `grader` command must name a real sub-command and real options, and a `python` or
`pytest` command must name files that exist. A page's headings are its link anchors, as GitHub
makes them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.cli.parse import build_parser
from grader.curriculum import BY_ID

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
SYNOPSIS = REPO / "docs" / "grading.md"  # its `text` block lists every sub-command and option
TEST_MAP = REPO / "docs" / "contributing.md"  # its table says which kit tests cover each part of grader/
TEST_MAP_HEADING = "## Which tests cover which part of grader/"
MAX_README_LINES = 200
SHELL_BLOCKS = {"bash", "sh", "shell", "console", ""}
FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
POSITIONAL_EXERCISES = {"check": "exercises", "hint": "exercise", "watch": "exercise"}


def _read(relative: str) -> str:
    return (REPO / relative).read_text()


def _extra_declared(name: str) -> bool:
    """Whether pyproject.toml's [project.optional-dependencies] declares `name` (no tomllib on Python 3.10)."""
    section = _read("pyproject.toml").partition("[project.optional-dependencies]")[2].partition("\n[")[0]
    return re.search(rf"^{re.escape(name)} = \[", section, re.M) is not None


@dataclass(frozen=True)
class Vouch:
    by: str  # what runs this command as written, or what it relies on
    holds: Callable[[], bool]  # a cheap check that it still does


# Every command other than `grader` that a README code block shows, as its words.
VOUCHED: dict[tuple[str, ...], Vouch] = {
    ("python3", "-m", "venv", "~/.venvs/attention-kit"): Vouch(
        "the standard library's venv, as tests/kit/deploy.py makes the deployments' Pythons",
        lambda: '"-m", "venv"' in _read("tests/kit/deploy.py")),
    (".", "~/.venvs/attention-kit/bin/activate"): Vouch(
        "the activate script of the venv made by the command before it",
        lambda: "python3 -m venv ~/.venvs/attention-kit" in README.read_text()),
    ("pip", "install", "torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu"): Vouch(
        "grader/recipes/grade.yml and setup.sh, run as written by tests/kit/test_recipes.py; "
        ".ci/run pins the same torch",
        lambda: all("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in _read(recipe)
                    for recipe in ("grader/recipes/grade.yml", "grader/recipes/setup.sh"))
        and "torch==2.13.0" in _read(".ci/run")),
    ("pip", "install", "-e", "."): Vouch(
        "grader/recipes/grade.yml, run as written by tests/kit/test_recipes.py",
        lambda: "pip install -e .\n" in _read("grader/recipes/grade.yml")),
    ("pip", "install", "-e", ".[dev]"): Vouch(
        ".ci/run; the dev extra of pyproject.toml",
        lambda: '-e ".[dev]"' in _read(".ci/run") and _extra_declared("dev")),
    ("pytest", "-n", "2", "--dist", "loadfile"): Vouch(
        ".ci/run, as `pytest -n 2 --dist loadfile --durations=25`; pytest-xdist in the dev extra",
        lambda: "\npytest -n 2 --dist loadfile --durations=25\n" in _read(".ci/run")
        and "pytest-xdist" in _read("pyproject.toml")),
}


def _without_code_blocks(text: str) -> str:
    return FENCE.sub(lambda match: "\n" * match.group(0).count("\n"), text)


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def _inline_code(text: str) -> list[str]:
    return INLINE_CODE.findall(_without_code_blocks(text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for line in _without_code_blocks(text).splitlines():
        if heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(heading.group(1))
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return found


def dead_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or whose heading, does not exist."""
    text = page.read_text()
    dead = []
    for target in LINK.findall(re.sub(r"`[^`\n]*`", "", _without_code_blocks(text))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not this test's business
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            shown = linked.relative_to(REPO) if linked.is_relative_to(REPO) else linked
            dead.append(f"{target}: {shown} does not exist")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            dead.append(f"{target}: {linked.name} has no heading with the anchor #{anchor}")
    return dead


def commands(line: str) -> list[list[str]]:
    """The simple commands of one shell line, as words: split on && || ; | ( ), comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    found: list[list[str]] = [[]]
    for word in lexer:
        if word and set(word) <= set("();&|<>"):
            found.append([])
        else:
            found[-1].append(word)
    return [words for words in found if words]


def _shell_commands(page: Path) -> list[list[str]]:
    lines = [line for language, body in _blocks(page.read_text()) if language in SHELL_BLOCKS
             for line in body.replace("\\\n", " ").splitlines()]
    return [words for line in lines for words in commands(line)]


def _as_grader(words: list[str]) -> list[str] | None:
    """The arguments after `grader` (or `python -m grader`), or None for another command."""
    if words[0] == "grader":
        return words[1:]
    if words[0] in ("python", "python3") and words[1:3] == ["-m", "grader"]:
        return words[3:]
    return None


PARSER = build_parser()
SUBCOMMANDS: dict[str, argparse.ArgumentParser] = next(
    action.choices for action in PARSER._actions if isinstance(action, argparse._SubParsersAction))


def _options(command: str) -> dict[str, argparse.Action]:
    # argparse has no public listing of a parser's options; its actions are the stable way in.
    return {option: action for action in SUBCOMMANDS[command]._actions
            for option in action.option_strings if action.help != argparse.SUPPRESS}


def parse_problem(arguments: list[str]) -> str | None:
    """Why the real `grader` parser refuses `arguments` (or names an unknown exercise), else None."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            parsed = PARSER.parse_args(arguments)
    except SystemExit:
        return errors.getvalue().strip() or "the parser exited"
    named = getattr(parsed, POSITIONAL_EXERCISES.get(parsed.command, ""), None) or []
    unknown = [name for name in ([named] if isinstance(named, str) else named) if name not in BY_ID]
    return f"no exercise is named {unknown[0]!r}" if unknown else None


def naming_problem(words: list[str]) -> str | None:
    """For a command in prose, which may leave out option values: a sub-command or option that does not exist."""
    if words[0] not in SUBCOMMANDS:
        return f"`grader {words[0]}` is not a sub-command"
    options = _options(words[0])
    named = [word.strip("[]").split("=")[0] for word in words[1:]]
    unknown = [word for word in named if OPTION.fullmatch(word) and word not in options]
    return f"`grader {words[0]}` has no option {unknown[0]}" if unknown else None


def missing_files(words: list[str]) -> str | None:
    """For `python FILE.py`, `python -m MODULE` and `pytest PATH...`: the first file named that does not exist."""
    if words[0] in ("python", "python3") and len(words) > 1:
        if words[1] == "-m" and len(words) > 2 and words[2] not in ("venv", "pip", "grader"):
            named = [words[2].replace(".", "/") + ".py", words[2].replace(".", "/")]
            return None if any((REPO / name).exists() for name in named) else f"no module {words[2]} in the kit"
        if words[1].endswith(".py") and not (REPO / words[1]).is_file():
            return f"{words[1]} does not exist"
    if words[0] == "pytest":
        for word in words[1:]:
            if ("/" in word or word.endswith(".py")) and not (REPO / word.split("::")[0]).exists():
                return f"{word} does not exist"
    return None


def map_problems(page: str, repo: Path = REPO) -> list[str]:
    """What the table under TEST_MAP_HEADING gets wrong about `repo`: a kit test file it leaves out, a test file or a
    path of grader/ it names that does not exist, a subpackage of grader/ without a row of its own."""
    section = page.partition(TEST_MAP_HEADING + "\n")[2].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]
    if not rows:
        return [f"no table under {TEST_MAP_HEADING!r}"]
    named = {name for row in rows for name in re.findall(r"\btest_\w+\.py\b", row)}
    paths = {span for row in rows for span in _inline_code(row) if span.startswith("grader/")}
    with_rows = {span.rstrip("/") for row in rows for span in _inline_code(row.split("|")[1])}
    kit_tests = {path.name for path in (repo / "tests" / "kit").glob("test_*.py")}
    packages = {f"grader/{init.parent.name}" for init in (repo / "grader").glob("*/__init__.py")}
    return ([f"{name} is in no row" for name in sorted(kit_tests - named)]
            + [f"{name} is not a file of tests/kit" for name in sorted(named - kit_tests)]
            + [f"{path} does not exist" for path in sorted(paths) if not (repo / path).exists()]
            + [f"{package}/ has no row" for package in sorted(packages - with_rows)])


def _name(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_the_readme_fits_in_200_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, (
        f"README.md has {lines} lines, over {MAX_README_LINES}: move reference material to a page of docs/")


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path):
    dead = dead_links(page)
    assert not dead, f"{_name(page)} has dead links:\n" + "\n".join(dead)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_grader_command_in_a_code_block_parses(page: Path):
    refused = [f"{shlex.join(words)}: {problem}" for words in _shell_commands(page)
               if (arguments := _as_grader(words)) is not None and (problem := parse_problem(arguments))]
    assert not refused, f"{_name(page)} shows commands the grader refuses:\n" + "\n".join(refused)


def test_every_other_readme_command_is_vouched_for():
    unknown, broken = [], []
    for words in _shell_commands(README):
        if _as_grader(words) is not None:
            continue
        vouch = VOUCHED.get(tuple(words))
        if vouch is None:
            unknown.append(shlex.join(words))
        elif not vouch.holds():
            broken.append(f"{shlex.join(words)}: no longer true of {vouch.by}")
    assert not unknown, ("README.md shows commands nothing vouches for; add each to VOUCHED with what runs it:\n"
                         + "\n".join(unknown))
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_commands_in_prose_name_real_options_and_files(page: Path):
    problems = []
    for span in _inline_code(page.read_text()):
        if not re.match(r"(grader|python3?|pytest)( |$)", span):
            continue
        try:
            words = shlex.split(span)
        except ValueError:  # an unbalanced quote: not a command
            continue
        arguments = _as_grader(words)
        if arguments == []:  # the program's bare name
            continue
        problem = naming_problem(arguments) if arguments is not None else missing_files(words)
        if problem:
            problems.append(f"`{span}`: {problem}")
    for words in _shell_commands(page):
        if _as_grader(words) is None and (problem := missing_files(words)):
            problems.append(f"{shlex.join(words)}: {problem}")
    assert not problems, f"{_name(page)}:\n" + "\n".join(problems)


def test_the_synopsis_lists_every_sub_command_and_option_the_parser_has():
    synopsis = next(body for language, body in _blocks(SYNOPSIS.read_text()) if language == "text")
    listed: dict[str, set[str]] = {}
    for line in synopsis.replace("\n ", " ").splitlines():
        words = line.split()
        problem = naming_problem(words[1:])
        assert problem is None, f"{_name(SYNOPSIS)}: {line}\n{problem}"
        listed[words[1]] = set(OPTION.findall(line))
    assert set(listed) == set(SUBCOMMANDS), (
        f"{_name(SYNOPSIS)} lists {sorted(listed)}, the parser has {sorted(SUBCOMMANDS)}")
    for command, shown in listed.items():
        actions = {id(action): action for action in _options(command).values()}
        left_out = [action.option_strings[-1] for action in actions.values()
                    if "--help" not in action.option_strings and not shown & set(action.option_strings)]
        assert not left_out, f"{_name(SYNOPSIS)}'s synopsis of `grader {command}` leaves out {', '.join(left_out)}"


def test_the_map_of_tests_names_every_kit_test_and_only_files_that_exist():
    problems = map_problems(TEST_MAP.read_text())
    assert not problems, f"{_name(TEST_MAP)}, {TEST_MAP_HEADING!r}:\n" + "\n".join(problems)


def test_the_checks_catch_a_dead_link_a_missing_heading_and_a_misspelt_option(tmp_path: Path):
    (tmp_path / "there.md").write_text("# Here\n\n## `grader batch`, class reports\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#grader-batch-class-reports) [gone](missing.md) [no heading](there.md#nowhere)\n"
                    "`[not a link](missing.md)`\n")
    assert [problem.split(":")[0] for problem in dead_links(page)] == ["missing.md", "there.md#nowhere"]
    assert parse_problem(["batch", "submissions", "--out", "marks"]) is None
    assert "--jobs" in (parse_problem(["batch", "submissions", "--out", "marks", "--jobs", "0"]) or "")
    assert parse_problem(["check", "masknig"]) == "no exercise is named 'masknig'"
    assert naming_problem(["check", "--timeout"]) is None
    assert naming_problem(["check", "--time-out"]) == "`grader check` has no option --time-out"
    assert commands('a && (cd b && zip -r ../c.zip .)  # d') == [["a"], ["cd", "b"], ["zip", "-r", "../c.zip", "."]]
    assert missing_files(["python", "benchmarks/no_such.py"]) == "benchmarks/no_such.py does not exist"
    for made in ("tests/kit/test_a.py", "tests/kit/test_b.py", "grader/intake/__init__.py", "grader/host/__init__.py"):
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).write_text("")
    table = (f"{TEST_MAP_HEADING}\n\n| part | tests |\n|---|---|\n| `grader/intake/` | `test_a.py`, `test_c.py` |\n"
             "| `grader/gone.py` | `test_a.py` |\n\n## Next\n\n| `grader/host/` | `test_b.py` |\n")
    assert map_problems(table, tmp_path) == ["test_b.py is in no row", "test_c.py is not a file of tests/kit",
                                             "grader/gone.py does not exist", "grader/host/ has no row"]


def test_every_environment_variable_the_grader_reads_is_in_the_table():
    """Each `GRADER_*` name in grader/'s code has its row in grading.md's Environment table, which says what it does
    (or that it is the kit's own, set for its slots)."""
    table = (REPO / "docs" / "grading.md").read_text(encoding="utf-8").split("## Environment", 1)[1].split("\n## ")[0]
    named = {name for path in (REPO / "grader").rglob("*.py")
             for name in re.findall(r"[\"'](GRADER_[A-Z_]+)[\"']", path.read_text(encoding="utf-8"))}
    assert len(named) >= 10, named
    assert not [name for name in sorted(named) if f"`{name}" not in table], "not in the Environment table"
    from grader.settings import VARIABLES

    rows = set(re.findall(r"^\| `(GRADER_[A-Z_]+)", table, re.MULTILINE))
    assert rows == set(VARIABLES), f"the table and grader/settings.py's VARIABLES differ: {rows ^ set(VARIABLES)}"
