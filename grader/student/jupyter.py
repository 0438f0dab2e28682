"""`jupyter` checks from a notebook cell: `%grader check attention`, or `grader.check("attention")` in code.

The grading runs in a `grader check` process of its own, exactly as on the command line (same sandbox,
same report), never in the kernel: the kernel has run the student's cells, so nothing it holds is
trusted, and a kernel lives for hours while pytest is made to run once per process. Its table and
failures are shown in the cell as they appear; the report comes back as a `GradeReport`. Bad input
raises `CheckError` with the command line's one-line message: a kernel is never asked to exit.

What is graded: `submission=` (or `--submission`) when given; else the notebook the cell runs in, as saved.
The kernel learns which from its front end: Jupyter Server (from 1.19: JupyterLab 4, Notebook 7) sets
`JPY_SESSION_NAME` in its environment (and ipykernel `__session__` from it); VS Code, the global
`__vsc_ipynb_file__`. Older servers (earlier Jupyter Server, under many a JupyterLab 3; the classic Notebook 6
server) say nothing but know: the server on this machine that started the kernel is asked for its sessions
(`api/sessions`, with the URL and token its `jpserver-*.json` or `nbserver-*.json` gives in Jupyter's runtime
folder), and the one holding this kernel (its id is in the kernel's connection file name) names the notebook.
Colab keeps notebooks in Google Drive, not on the machine: there, and in a kernel nothing tells (nbclient,
papermill, `nbconvert --execute`, a server that does not answer), `CheckError` says so in one line and how to
name the notebook: never another target, silently. Outside a kernel, `exercises/`, as on the command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from grader import lang
from grader.kit import kit_root
from grader.lang import tr
from grader.student import sessions

if TYPE_CHECKING:
    from grader.grade.reports import GradeReport

# Where the kernel learns which notebook it runs: Jupyter Server's environment, ipykernel's and VS Code's globals.
NOTEBOOK_GLOBALS = ("__vsc_ipynb_file__", "__session__")
EXIT_OK, EXIT_FAIL_UNDER, EXIT_USAGE = 0, 1, 2


class CheckError(Exception):
    """`grader check` refused its input (exit 2) or failed itself (exit 3); the message says what to do."""


def this_notebook(namespace: dict[str, object] | None = None) -> Path | None:
    """The saved notebook this kernel runs, when Jupyter (or VS Code) says which and it exists; where they
    say nothing in a kernel, as the Jupyter server that started it has it open (see `sessions.asked_server`).

    Jupyter Server gives the path relative to its own folder, and starts the kernel in the notebook's
    folder: a relative path that does not exist from here is looked for by its name, here."""
    said = [os.environ.get("JPY_SESSION_NAME", "")]
    said += [str(namespace.get(name, "")) for name in NOTEBOOK_GLOBALS] if namespace else []
    for candidate in said:
        path = Path(candidate.removeprefix("file://"))
        if path.suffix != ".ipynb":
            continue
        for found in (path, Path.cwd() / path.name):
            if found.is_file():
                return found
    if "ipykernel" in sys.modules:
        asked = sessions.asked_server()
        if asked is not None and asked.suffix == ".ipynb" and asked.is_file():
            return asked
    return None


def check(*exercises: str, submission: str | os.PathLike[str] | None = None, suite: str | None = None,
          quick: bool = False, verbose: bool = False, timeout: float | None = None, lang: str | None = None,
          more: tuple[str, ...] = ()) -> GradeReport:
    """Grade like `grader check EXERCISES...`, show the result here, return the report; `lang` is `--lang`
    (default: GRADER_LANG, then the kernel's locale)."""
    arguments = ["check", *exercises]
    arguments += ["--lang", lang] if lang else []
    arguments += ["--suite", suite] if suite else []
    arguments += ["--quick"] if quick else []
    arguments += ["-v"] if verbose else []
    arguments += ["--timeout", str(timeout)] if timeout is not None else []
    return run_check([*arguments, *more], submission=submission)


@contextlib.contextmanager
def speaking(arguments: list[str]) -> Iterator[None]:
    """While a command runs from a cell, what the kernel says itself (its errors, the table it shows) is in the
    command's language: `--lang` where given, else GRADER_LANG, else the kernel's locale, as the command has it.
    Afterwards the kernel's language is as it was: one `--lang zh` is not the next cell's. The command's process is
    told the same language (`child_environment`)."""
    asked = next((value for name, value in itertools.pairwise(arguments) if name == "--lang"), None)
    asked = next((a.removeprefix("--lang=") for a in arguments if a.startswith("--lang=")), asked)
    before = lang.current()
    lang.use(lang.choose(asked))
    try:
        yield
    finally:
        lang.use(before)


def run_check(arguments: list[str], *, submission: str | os.PathLike[str] | None = None,
              namespace: dict[str, object] | None = None) -> GradeReport:
    """`grader check ARGUMENTS` in its own process; its report, shown here with rich (as HTML in Jupyter)."""
    with speaking(arguments):
        return _run_check(arguments, submission=submission, namespace=namespace)


def _run_check(arguments: list[str], *, submission: str | os.PathLike[str] | None,
               namespace: dict[str, object] | None) -> GradeReport:
    from rich.console import Console

    from grader.grade.reports import GradeReport
    from grader.intake.submission import SubmissionInputError, load
    from grader.view.render import render

    # `--submission=X` is `--submission X` (as the command line reads it): the notebook graded is then X, not this one.
    arguments = [part for argument in arguments for part in (
        argument.split("=", 1) if argument.startswith("--submission=") else [argument])]
    with tempfile.TemporaryDirectory(prefix="grader-cell-") as folder:
        shown, chosen = arguments, None
        if "--submission" not in arguments:
            chosen = Path(submission) if submission is not None else this_notebook(namespace)
            if chosen is None and _in_a_kernel():
                raise CheckError(_cannot_tell(arguments))
            graded = chosen
            if chosen is not None and chosen.suffix == ".ipynb":
                graded = _with_what_it_uses(chosen, Path(folder) / "notebooks")
            shown = [*arguments, *(["--submission", str(chosen)] if chosen is not None else [])]
            arguments = [*arguments, *(["--submission", str(graded)] if graded is not None else [])]
        report_path = Path(folder) / "report.json"
        print(f"grader {shlex.join(shown)}", flush=True)  # the notebook, never the copies made for the check
        code, error = _run([*arguments, "--json", str(report_path)], show=False)
        if code not in (EXIT_OK, EXIT_FAIL_UNDER) or not report_path.is_file():
            raise CheckError(error or tr("grader check stopped with exit code {code}", code=code))
        report = GradeReport.from_json_file(report_path)
        try:
            files = load(Path(report.submission))  # only to name the file or notebook cell to open next
        except (SubmissionInputError, OSError):
            files = None
        if shown is not arguments:  # the table names the notebook too, not a folder gone when the cell ends
            report = dataclasses.replace(report, submission=shown[shown.index("--submission") + 1])
        note = _kernel_note(chosen if submission is None else None, shown, namespace, report)
        if note:
            report = dataclasses.replace(report, warnings=(*report.warnings, note))
    render(report, Console(highlight=False, emoji=False), verbose="-v" in arguments or "--verbose" in arguments,
           files=files)
    return report


def _kernel_note(told: Path | None, shown: list[str], namespace: dict[str, object] | None,
                 report: GradeReport) -> str | None:
    """The line that says this kernel ran code its saved notebook does not hold (`unsaved`), where the notebook
    graded is this kernel's: `told` (as Jupyter said), or one named that Jupyter does not say is another."""
    from grader.student.unsaved import kernel_note

    if not _in_a_kernel():
        return None
    graded = Path(shown[shown.index("--submission") + 1]) if "--submission" in shown[:-1] else None
    if told is None and graded is not None and graded.suffix == ".ipynb" and graded.is_file():
        running = this_notebook(namespace)
        told = graded if running is None or running.resolve() == graded.resolve() else None
    return kernel_note(told, [exercise.id for exercise in report.exercises]) if told is not None else None


def _cannot_tell(arguments: list[str]) -> str:
    """The one line that says the notebook cannot be told, and how to name it."""
    if "google.colab" in sys.modules:
        saved = "/content/drive/MyDrive/Colab Notebooks/01-attention.ipynb"
        return tr("cannot tell which notebook this cell runs in: Colab keeps it in Google Drive, not on this "
                  "machine; mount Drive (from google.colab import drive; drive.mount(\"/content/drive\")) and name "
                  "the notebook as saved there, e.g. %grader {arguments} --submission {notebook}",
                  arguments=shlex.join(arguments), notebook=shlex.quote(saved))
    return tr("cannot tell which notebook this cell runs in (this front end does not say): name it, e.g. "
              "%grader {arguments} --submission 01-attention.ipynb (--submission exercises for the .py files), or "
              "grader.check(..., submission=\"01-attention.ipynb\")", arguments=shlex.join(arguments))


def _in_a_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (where a check means this notebook, not exercises/), Colab's too
    (its shell is a kind of ipykernel's)."""
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None)
    return "ipykernel" in sys.modules and get is not None and any(
        kind.__name__ == "ZMQInteractiveShell" for kind in type(get()).__mro__)


def _with_what_it_uses(path: Path, folder: Path) -> Path:
    """`path`, or where it has `%grader use` lines, a copy of it beside copies of the notebooks they name:
    the grader grades the notebook alone, never reading a file a notebook names."""
    from grader.intake.uses import used_notebooks, uses_of

    used, _ = used_notebooks(uses_of(path), path.parent, seen={path.resolve()})
    if not used:
        return path
    folder.mkdir()
    for notebook_path in [*used, path]:
        shutil.copyfile(notebook_path, folder / notebook_path.name)
    return folder


def _run(arguments: list[str], *, show: bool = True) -> tuple[int, str]:
    """`python -m grader ARGUMENTS`, this very grader (its output printed here line by line when `show`); its
    exit code and its one-line error, if any."""
    process = subprocess.Popen([sys.executable, "-m", "grader", *arguments], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_environment(), text=True,
                               encoding="utf-8", errors="replace")
    assert process.stdout is not None and process.stderr is not None
    for line in process.stdout:
        if show:
            print(line, end="", flush=True)
    errors = process.stderr.read()
    return process.wait(), error_line(errors)


def child_environment() -> dict[str, str]:
    """The environment of a `python -m grader` child: this very grader first on the path, one thread, UTF-8 output
    whatever the locale's code page (cp936 on a Chinese Windows), and the language this process speaks now (a cell's
    `--lang`, `grader watch`'s), set here for the child rather than left to this process's environment."""
    package_root = str(kit_root())
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": "1",
            "PYTHONIOENCODING": "utf-8", "GRADER_LANG": lang.current()}


def error_line(stderr: str) -> str:
    """The one-line error a `grader` child printed last ("grader: error: ..."), without its prefix; "" if none."""
    return next((line.removeprefix("grader: error: ") for line in reversed(stderr.splitlines())
                 if line.startswith("grader: ")), "")


def grader_magic(line: str, namespace: dict[str, object] | None = None) -> None:
    """`%grader check attention [--suite public ...]`; `%grader use 01-attention` (see `use`); other commands
    (`hint`, `list`) run as on the command line. Returns nothing: `grader.check(...)` returns the report."""
    try:
        arguments = shlex.split(line)
    except ValueError as error:
        with speaking(line.split()):
            raise CheckError(tr("cannot read the arguments ({error}): quote them as in a shell",
                                error=error)) from None
    if arguments[:1] == ["use"]:
        use(arguments[1:], namespace if namespace is not None else {})
    elif arguments[:1] == ["check"]:
        run_check(arguments, namespace=namespace)
    else:
        with speaking(arguments):
            code, error = _run(arguments)
            if code >= EXIT_USAGE:
                raise CheckError(error or tr("grader {command} stopped with exit code {code}", command=line,
                                             code=code))


def use(names: list[str], namespace: dict[str, object]) -> list[str]:
    """`%grader use 01-attention 02-masking`: run those notebooks' imports and definitions (nothing else) here.

    They are found next to this notebook (or in the current folder), with what they use themselves first.
    This runs the student's own code in the student's own kernel, as running those cells would.
    """
    with speaking([]):
        return _use(names, namespace)


def _use(names: list[str], namespace: dict[str, object]) -> list[str]:
    from grader.intake import notebook
    from grader.intake.uses import used_notebooks

    here = this_notebook(namespace)
    folder = here.parent if here is not None else Path.cwd()
    used, missing = used_notebooks(names, folder, seen=set())
    if missing:
        raise CheckError(tr("there is no notebook {notebook} in {folder}: `%grader use` names notebooks next to "
                            "this one, without .ipynb (e.g. `%grader use 01-attention`)", notebook=missing[0],
                            folder=str(folder)))
    defined: list[str] = []
    for path in used:
        try:
            source, names_defined = notebook.script(notebook.cells(path.read_bytes(), name=path.name))
        except (OSError, notebook.NotebookError) as error:
            raise CheckError(tr("cannot use {notebook}: {error}", notebook=path.name, error=error)) from None
        exec(compile(source, str(path), "exec"), namespace)
        defined += names_defined
        print(tr("from {notebook}: {names}", notebook=path.name, names=", ".join(names_defined) or
                 tr("no definitions")))
    return defined


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext grader`: the `%grader` line magic."""

    def magic(line: str) -> None:
        from IPython.core.error import UsageError

        try:
            grader_magic(line, getattr(ipython, "user_ns", None))
        except CheckError as error:  # IPython shows a UsageError as its one line, never a traceback
            raise UsageError(str(error)) from None

    magic.__doc__ = grader_magic.__doc__
    ipython.register_magic_function(magic, magic_kind="line", magic_name="grader")  # type: ignore[attr-defined]
