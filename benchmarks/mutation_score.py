"""Mutation score of `solutions/` against the graded suites: how many single-point mutants each exercise's tests kill.

A small generator (the standard library's `ast`, no mutmut) makes single-point mutants of each exercise's
reference file: operator swaps, constant changes, a function for its look-alike (sin for cos, tril for triu),
a call replaced by its argument, an argument dropped.
Each mutation replaces exactly one node's source span by the mutated node (`ast.unparse`), so the rest of
the file stays byte-identical. Each mutant is graded alone, on its own exercise, by `grader check --quick
--suite all` in a warm grading process (`grader.student.warm`), beside the unmutated reference of every
other exercise. A mutant is killed when its exercise scores below the reference, when one of its tests fails
that is worth no points on this machine (the device tests without a GPU give feedback only), or when the check
gave no report (refused, timed out, crashed). Mutants judged equivalent (they cannot change anything the contract
fixes) are kept by hand in `equivalent_mutants.txt`, one a line with the reason, and left out of the score.
Each survivor of the quick run is then graded once more in a full run (the capstone's training too), and
labelled with whether that kills it; the score stays the quick run's.

Not part of CI (it takes a while). Goal: at least 95% of the non-equivalent mutants killed in every exercise.

    OMP_NUM_THREADS=1 python benchmarks/mutation_score.py [--exercise ID ...] [--limit N] [--jobs N]
                                                          [--json PATH] [--list] [--no-full]
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import queue
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.curriculum import BY_ID, EXERCISES  # noqa: E402 - after the kit's folder is on the path
from grader.student.warm import Checked, WarmChecker  # noqa: E402

EQUIVALENTS = Path(__file__).with_name("equivalent_mutants.txt")
GOAL = 0.95
BUDGET_S = 60.0  # a quick check of the reference takes seconds; a mutant that hangs is killed by the budget

BINARY_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.Pow: ast.Mult, ast.MatMult: ast.Mult, ast.FloorDiv: ast.Div,
}
COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
BOOL_SWAPS: dict[type[ast.boolop], type[ast.boolop]] = {ast.And: ast.Or, ast.Or: ast.And}
DROPPED_UNARY = (ast.USub, ast.Not, ast.Invert)  # `-x`, `not x`, `~x` -> `x`
NAME_SWAPS = {  # a called function or method for its look-alike: `torch.sin(a)` -> `torch.cos(a)`
    "sin": "cos", "cos": "sin", "tril": "triu", "triu": "tril", "softmax": "log_softmax", "log_softmax": "softmax",
    "mean": "sum", "sum": "mean", "max": "min", "min": "max", "argmax": "argmin", "relu": "sigmoid", "exp": "log",
    "log": "exp", "zeros": "ones", "ones": "zeros", "zeros_like": "ones_like", "ones_like": "zeros_like",
}


class Fate(StrEnum):
    KILLED = "killed"
    SURVIVED = "survived"
    EQUIVALENT = "equivalent"


@dataclass(frozen=True)
class Mutant:
    exercise: str
    file: str  # relative to the kit: solutions/<id>.py
    line: int
    operator: str
    before: str  # the original segment, whitespace collapsed
    after: str
    source: str  # the whole mutated file
    column: int = 0  # the segment's first character in its line (UTF-8 bytes, as `ast` counts)
    occurrence: int = 0  # 1, 2, ... from the left, when the same line has the same before → after more than once

    @property
    def key(self) -> str:
        """`file:line: before → after`, how `equivalent_mutants.txt` names a mutant."""
        suffix = f" [{self.occurrence}]" if self.occurrence else ""
        return f"{self.file}:{self.line}: {self.before} → {self.after}{suffix}"


@dataclass(frozen=True)
class Graded:
    mutant: Mutant
    fate: Fate
    score: float | None  # the exercise's score, None when the check gave no report
    baseline: float
    failed_tests: tuple[str, ...]
    problem: str  # why there was no report
    full_score: float | None = None  # a survivor's score in a full run (the slow tests too), of full_baseline
    full_baseline: float | None = None


# -- the generator -------------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


def _is_main_guard(statement: ast.stmt) -> bool:
    test = statement.test if isinstance(statement, ast.If) else None
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _assigns_all(statement: ast.stmt) -> bool:
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, ast.AugAssign | ast.AnnAssign) else []
    return any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets)


def _mutable_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` a mutation may touch: not docstrings, imports, annotations, `raise`, assert
    messages, `__all__` or what runs under `if __name__ == ...`."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.Raise) or _is_main_guard(node) or _assigns_all(node):
        return
    yield node
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        children: list[ast.AST] = [*node.decorator_list, *node.args.defaults,
                                   *(default for default in node.args.kw_defaults if default is not None),
                                   *node.body]
    elif isinstance(node, ast.AnnAssign):
        children = [node.target] + ([node.value] if node.value is not None else [])
    elif isinstance(node, ast.Assert):
        children = [node.test]
    elif isinstance(node, ast.arg):
        children = []
    else:
        children = list(ast.iter_child_nodes(node))
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body \
            and _is_docstring(node.body[0]):
        children.remove(node.body[0])
    for child in children:
        yield from _mutable_nodes(child)


def _constant(value: object) -> object | None:
    """The mutated constant: True <-> False, 0 <-> 1, n -> n + 1, 0.0 -> 0.5, x -> 2x; strings and None kept."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return {0: 1, 1: 0}.get(value, value + 1)
    if isinstance(value, float):
        return 0.5 if value == 0.0 else value * 2
    return None


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def _negative_number(node: ast.AST) -> ast.Constant | None:
    """The constant under `-` when `node` is a negative number such as `-1`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _is_number(node.operand):
        assert isinstance(node.operand, ast.Constant)
        return node.operand
    return None


def _number(value: float) -> ast.expr:
    """`value` as the parser reads it back: a negative number is a minus applied to a constant."""
    return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _mutations(node: ast.AST, signed: set[int]) -> Iterator[tuple[str, ast.expr]]:
    """(operator name, the expression that replaces `node`) for each single-point mutation of `node`;
    `signed` holds the ids of the constants under a minus, mutated with their sign (`-1` -> `0`, not `-0`)."""
    if (operand := _negative_number(node)) is not None:
        value = _constant(-operand.value)
        if isinstance(value, int | float):
            yield "constant", _number(value)
        yield "unary operator dropped", copy.deepcopy(operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY_SWAPS:
        mutated = copy.deepcopy(node)
        mutated.op = BINARY_SWAPS[type(node.op)]()
        yield "binary operator", mutated
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, DROPPED_UNARY):
        yield "unary operator dropped", copy.deepcopy(node.operand)
    elif isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAPS:
                mutated = copy.deepcopy(node)
                mutated.ops[index] = COMPARE_SWAPS[type(op)]()
                yield "comparison", mutated
    elif isinstance(node, ast.BoolOp):
        mutated = copy.deepcopy(node)
        mutated.op = BOOL_SWAPS[type(node.op)]()
        yield "boolean operator", mutated
    elif isinstance(node, ast.Constant) and id(node) not in signed and (value := _constant(node.value)) is not None:
        yield "constant", ast.Constant(value)
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in NAME_SWAPS:
            mutated = copy.deepcopy(node)
            if isinstance(mutated.func, ast.Attribute):
                mutated.func.attr = NAME_SWAPS[name]
            else:
                mutated.func = ast.Name(NAME_SWAPS[name], ast.Load())
            yield "function swapped", mutated
        if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            yield "call dropped", copy.deepcopy(node.args[0])
        for index in range(len(node.keywords)):
            mutated = copy.deepcopy(node)
            del mutated.keywords[index]
            yield "keyword argument dropped", mutated
        if len(node.args) >= 2:
            mutated = copy.deepcopy(node)
            del mutated.args[-1]
            yield "last positional argument dropped", mutated


def _parents(tree: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    """id(node) -> (parent, field, index in the field's list or None)."""
    found: dict[int, tuple[ast.AST, str, int | None]] = {}
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        found[id(item)] = (parent, field, index)
            elif isinstance(value, ast.AST):
                found[id(value)] = (parent, field, None)
    return found


def _dump_with(tree: ast.Module, place: tuple[ast.AST, str, int | None], replacement: ast.AST) -> str:
    """The module's dump with the node at `place` replaced (and put back afterwards)."""
    parent, field, index = place
    holder = getattr(parent, field)
    original = holder[index] if index is not None else holder
    if index is not None:
        holder[index] = replacement
    else:
        setattr(parent, field, replacement)
    try:
        return ast.dump(tree)
    finally:
        if index is not None:
            holder[index] = original
        else:
            setattr(parent, field, original)


def mutants_of(exercise: str) -> list[Mutant]:
    """Every single-point mutant of `solutions/<exercise>.py` that compiles and differs from it, in file order."""
    file = f"solutions/{BY_ID[exercise].file}"
    text = (ROOT / file).read_text(encoding="utf-8")
    data = text.encode("utf-8")  # col_offset counts UTF-8 bytes
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    tree = ast.parse(text)
    parents = _parents(tree)
    signed = {id(operand) for node in ast.walk(tree) if (operand := _negative_number(node)) is not None}
    made: list[Mutant] = []
    seen = {text}
    for node in _mutable_nodes(tree):
        if not isinstance(node, ast.expr) or id(node) not in parents:
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        before = data[begin:end].decode("utf-8")
        for operator, replacement in _mutations(node, signed):
            expected = _dump_with(tree, parents[id(node)], replacement)
            new = ast.unparse(replacement)
            # The bare text may bind differently in its context (`a * b` where `a ** b` stood): parenthesise then.
            for after in (new, f"({new})"):
                source = (data[:begin] + after.encode("utf-8") + data[end:]).decode("utf-8")
                try:
                    compile(source, file, "exec")
                    if ast.dump(ast.parse(source)) != expected:
                        continue
                except SyntaxError:
                    continue
                if source not in seen:
                    seen.add(source)
                    made.append(Mutant(exercise, file, node.lineno, operator, _one_line(before), _one_line(after),
                                       source, node.col_offset))
                break
    made.sort(key=lambda mutant: (mutant.line, mutant.column))  # stable: an outer node before the nodes inside it
    keys = Counter(mutant.key for mutant in made)
    occurrences: Counter[str] = Counter()
    numbered = []
    for mutant in made:
        if keys[mutant.key] > 1:
            occurrences[mutant.key] += 1
            mutant = Mutant(**{**asdict(mutant), "occurrence": occurrences[mutant.key]})
        numbered.append(mutant)
    return numbered


# -- the equivalent mutants ----------------------------------------------------------------------------------


def read_equivalents(path: Path) -> dict[str, str]:
    """`key  # why` per line of `path` -> {key: why}; blank lines and lines starting with `#` are comments."""
    found: dict[str, str] = {}
    if not path.is_file():
        return found
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, separator, why = line.partition(" # ")
        if not separator or not why.strip():
            raise SystemExit(f"{path.name}:{number}: an equivalent mutant needs ` # why` after its key: {line!r}")
        found[_one_line(key)] = why.strip()
    return found


# -- grading -------------------------------------------------------------------------------------------------


def exercise_files() -> dict[str, str]:
    return {exercise.file: (ROOT / "solutions" / exercise.file).read_text(encoding="utf-8")
            for exercise in EXERCISES}


def write_submission(folder: Path, files: dict[str, str], mutant: Mutant | None = None) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    if mutant is not None:
        (folder / BY_ID[mutant.exercise].file).write_text(mutant.source, encoding="utf-8")
    return folder


def exercise_score(checked: Checked, exercise: str) -> tuple[float | None, tuple[str, ...], str]:
    """(the exercise's score, the tests that went wrong, why there is no score)."""
    if checked.report is None:
        return None, (), ("refused: " if checked.refused else "") + (checked.problem or "no report")
    for result in checked.report.exercises:
        if result.id == exercise:
            return result.score, tuple(test.name for test in result.tests if test.outcome.went_wrong), ""
    return None, (), f"the report has no exercise {exercise}"


def baselines(checker: WarmChecker, files: dict[str, str], exercises: list[str], work: Path) -> dict[str, float]:
    """Each exercise's quick score on the unmutated reference; exits when a test the quick mode runs fails."""
    submission = write_submission(work / "reference", files)
    found: dict[str, float] = {}
    for exercise in exercises:
        score, failed, problem = exercise_score(checker.check(submission, [exercise]), exercise)
        if score is None or failed:
            checker.close()
            raise SystemExit(f"the reference does not pass {exercise}'s quick tests, so no mutant can be judged: "
                             f"{problem or ', '.join(failed)}")
        found[exercise] = score
    return found


def grade(checker: WarmChecker, mutant: Mutant, files: dict[str, str], baseline: float, work: Path,
          equivalent: bool) -> Graded:
    submission = write_submission(Path(tempfile.mkdtemp(dir=work)) / "submission", files, mutant)
    score, failed, problem = exercise_score(checker.check(submission, [mutant.exercise]), mutant.exercise)
    killed = score is None or score < baseline - 1e-9 or bool(failed)  # the reference fails none (`baselines`)
    fate = Fate.EQUIVALENT if equivalent else Fate.KILLED if killed else Fate.SURVIVED
    return Graded(mutant, fate, score, baseline, failed, problem)


def confirm_in_full(results: dict[str, list[Graded]], survivors: list[Graded], files: dict[str, str],
                    budget_s: float) -> dict[str, list[Graded]]:
    """Grade each survivor of the quick run again without --quick: whether only the slow tests (the capstone's
    training) kill it. The score stays the quick one, as the goal says; this only labels the survivors."""
    checker = WarmChecker(suite="all", quick=False, budget_s=max(budget_s, 300.0))
    confirmed: dict[int, Graded] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mutation-score-full-") as folder:
            work = Path(folder)
            reference = write_submission(work / "reference", files)
            full_baseline = {exercise: exercise_score(checker.check(reference, [exercise]), exercise)[0]
                             for exercise in {one.mutant.exercise for one in survivors}}
            for one in survivors:
                submission = write_submission(Path(tempfile.mkdtemp(dir=work)) / "submission", files, one.mutant)
                score = exercise_score(checker.check(submission, [one.mutant.exercise]), one.mutant.exercise)[0]
                confirmed[id(one)] = replace(one, full_score=-1.0 if score is None else score,
                                             full_baseline=full_baseline[one.mutant.exercise])
    finally:
        checker.close()
    return {exercise: [confirmed.get(id(one), one) for one in graded] for exercise, graded in results.items()}


# -- the command ---------------------------------------------------------------------------------------------


def print_counts(mutants: dict[str, list[Mutant]]) -> None:
    total = sum(len(found) for found in mutants.values())
    print(f"{total} mutants: " + ", ".join(f"{exercise} {len(found)}" for exercise, found in mutants.items()))
    operators = Counter(mutant.operator for found in mutants.values() for mutant in found)
    print("by operator: " + ", ".join(f"{operator} {count}" for operator, count in operators.most_common()))


def report(results: dict[str, list[Graded]], equivalents: dict[str, str]) -> tuple[int, int, list[str]]:
    """Print per exercise the score and the survivors; (killed, non-equivalent, exercises short of the goal)."""
    killed_all = counted_all = 0
    short = []
    for exercise, graded in results.items():
        counted = [one for one in graded if one.fate != Fate.EQUIVALENT]
        killed = [one for one in counted if one.fate == Fate.KILLED]
        equivalent = [one for one in graded if one.fate == Fate.EQUIVALENT]
        score = len(killed) / len(counted) if counted else 1.0
        killed_all, counted_all = killed_all + len(killed), counted_all + len(counted)
        if score < GOAL:
            short.append(exercise)
        print(f"{exercise}: killed {len(killed)} of {len(counted)} non-equivalent ({len(equivalent)} equivalent)"
              f" = {score:.1%}")
        for one in counted:
            if one.fate == Fate.SURVIVED:
                full = ""
                if one.full_score is not None and one.full_baseline is not None:
                    full = ("  (a full run kills it: " if one.full_score < one.full_baseline - 1e-9 else
                            "  (a full run does not kill it either: ") + f"{one.full_score:g} of {one.full_baseline:g})"
                print(f"  {one.mutant.key}{full}")
        for one in killed:
            if one.problem:
                print(f"  killed without a report ({one.problem}): {one.mutant.key}")
        for one in equivalent:
            score_text = "no report" if one.score is None else f"{one.score:g} of {one.baseline:g}"
            if one.score is None or one.score < one.baseline - 1e-9:
                print(f"  WARNING: listed as equivalent but killed ({score_text}): {one.mutant.key}")
    return killed_all, counted_all, short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exercise", action="append", choices=[exercise.id for exercise in EXERCISES],
                        help="an exercise to mutate, of either track (repeatable; default: every exercise of both)")
    parser.add_argument("--limit", type=int, help="at most N mutants per exercise (a quick try)")
    parser.add_argument("--jobs", type=int, default=1, help="warm grading processes side by side (one per core)")
    parser.add_argument("--json", type=Path, help="write every mutant's result here")
    parser.add_argument("--list", action="store_true", help="print the mutants without grading them")
    parser.add_argument("--full", action=argparse.BooleanOptionalAction, default=True,
                        help="grade each survivor again in a full run, slow tests too (default: on)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds per check (default %(default)s)")
    args = parser.parse_args()
    exercises = args.exercise or [exercise.id for exercise in EXERCISES]
    exercises = [exercise.id for exercise in EXERCISES if exercise.id in exercises]  # curriculum order, once each

    mutants = {exercise: mutants_of(exercise)[:args.limit] for exercise in exercises}
    equivalents = read_equivalents(EQUIVALENTS)
    print_counts(mutants)
    if args.limit is None:
        generated = {mutant.key for found in mutants.values() for mutant in found}
        mutated = tuple(f"solutions/{BY_ID[exercise].file}:" for exercise in exercises)
        for key in equivalents:
            if key.startswith(mutated) and key not in generated:
                print(f"WARNING: {EQUIVALENTS.name} lists a mutant that is no longer generated: {key}")
    if args.list:
        for found in mutants.values():
            for mutant in found:
                mark = "  (equivalent)" if mutant.key in equivalents else ""
                print(f"  {mutant.key}  [{mutant.operator}]{mark}")
        return

    started = time.perf_counter()
    files = exercise_files()
    # Slots die with the thread that started them (PR_SET_PDEATHSIG): start them all here, in the main thread.
    checkers = [WarmChecker(suite="all", quick=True, budget_s=args.budget) for _ in range(max(1, args.jobs))]
    idle: queue.Queue[WarmChecker] = queue.Queue()
    for checker in checkers:
        idle.put(checker)
    results: dict[str, list[Graded]] = {exercise: [] for exercise in exercises}
    try:
        with tempfile.TemporaryDirectory(prefix="mutation-score-") as folder:
            work = Path(folder)
            baseline = baselines(checkers[0], files, exercises, work)
            print("baseline (quick): " + ", ".join(f"{exercise} {score:g}" for exercise, score in baseline.items()))

            def one(mutant: Mutant) -> Graded:
                checker = idle.get()
                try:
                    return grade(checker, mutant, files, baseline[mutant.exercise], work, mutant.key in equivalents)
                finally:
                    idle.put(checker)

            todo = [mutant for found in mutants.values() for mutant in found]
            with ThreadPoolExecutor(max_workers=len(checkers)) as pool:
                futures = [pool.submit(one, mutant) for mutant in todo]
                for done, future in enumerate(as_completed(futures), start=1):
                    graded = future.result()
                    results[graded.mutant.exercise].append(graded)
                    if sys.stderr.isatty():
                        print(f"\r{done}/{len(todo)} graded", end="", file=sys.stderr, flush=True)
            if sys.stderr.isatty():
                print(file=sys.stderr)
    finally:
        for checker in checkers:
            checker.close()
    survivors = [one for graded in results.values() for one in graded if one.fate == Fate.SURVIVED]
    if survivors and args.full:
        results = confirm_in_full(results, survivors, files, args.budget)
    elapsed = time.perf_counter() - started
    for graded in results.values():
        graded.sort(key=lambda one: (one.mutant.line, one.mutant.column, one.mutant.key))

    killed, counted, short = report(results, equivalents)
    total = killed / counted if counted else 1.0
    equivalent = sum(one.fate == Fate.EQUIVALENT for graded in results.values() for one in graded)
    print(f"all: killed {killed} of {counted} non-equivalent ({equivalent} equivalent) = {total:.1%} "
          f"in {elapsed:.0f} s; " + (f"goal met ({GOAL:.0%} in every exercise)" if not short else
                                     f"goal not met ({GOAL:.0%} in every exercise): {', '.join(short)}"))
    if args.json:
        args.json.write_text(json.dumps({
            "goal": GOAL, "duration_s": round(elapsed, 1), "goal_met": not short,
            "mutants": [{"key": one.mutant.key, "exercise": one.mutant.exercise, "file": one.mutant.file,
                         "line": one.mutant.line, "operator": one.mutant.operator, "before": one.mutant.before,
                         "after": one.mutant.after, "fate": one.fate.value, "score": one.score,
                         "baseline": one.baseline, "failed_tests": list(one.failed_tests), "problem": one.problem,
                         "full_score": one.full_score, "full_baseline": one.full_baseline,
                         "why_equivalent": equivalents.get(one.mutant.key)}
                        for graded in results.values() for one in graded],
        }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
