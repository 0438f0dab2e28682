"""Every random draw of a grading comes from one seed, so that a regrade of the same files is the same report.

The grading's seed is derived from what is graded (the code of the submission's files as intake read them), the
kit's version and an optional course salt (`GRADER_SALT`, set by an instructor where students cannot read it:
without it anyone with the kit can work out a grading's draws, as they can today from the suites' code).
Each test's seed is derived from the grading's and the test's id; it seeds the trusted process's torch and
the worker's before the test's first request (grader.judge.plugin), and the capstone draws its task from it.
`grader check --seed N` grades with N as the grading's seed: the seed a report records reproduces it.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping

from grader.intake.imports import syntax_tree
from grader.kit import VERSION

SALT_VARIABLE = "GRADER_SALT"


def grading_seed(files: Mapping[str, bytes], *, salt: str = "") -> int:
    """A 63-bit seed that changes with the code of any file, with the kit's version and with the salt.

    The code, not the bytes: a file is read as Python's syntax tree, so a comment, a blank line or the file's layout
    draws as before, and a student who only annotates sees the same report (a verdict that depends on the draw would
    otherwise move with a comment). A file that does not parse counts by its bytes."""
    digest = hashlib.sha256(f"attention-kit {VERSION}\0{salt}\0".encode())
    for name in sorted(files):
        data = _code(files[name])
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return int.from_bytes(digest.digest()[:8], "little") >> 1


def _code(data: bytes) -> bytes:
    tree = syntax_tree(data)
    try:
        return data if tree is None else ast.dump(tree).encode()
    except RecursionError:  # a tree the parser took but too deep to print
        return data


def seed_of_test(grading: int, test_id: str) -> int:
    """A test's 32-bit seed: the same test in the same grading always draws the same inputs."""
    return int.from_bytes(hashlib.sha256(f"{grading}\0{test_id}".encode()).digest()[:4], "little")


def worker_seed(test: int) -> int:
    """What the worker's torch is seeded with for a test: not the test's own seed, which the worker need not know."""
    return int.from_bytes(hashlib.sha256(f"worker\0{test}".encode()).digest()[:4], "little")
