"""`kit` says which kit this is and where it lies, for every layer of the grader: its version, and its root folder
(exercises/, tests/ and, for instructors, solutions/), whose hidden tests may or may not be installed.

It imports nothing of the grader's, so that any module may ask it, from the sandbox's neighbours to the command line.
"""

from __future__ import annotations

from pathlib import Path

VERSION = "0.1.0"


def kit_root() -> Path:
    """The folder holding exercises/, tests/ and (for instructors) solutions/."""
    return Path(__file__).resolve().parent.parent


def hidden_installed(root: Path | None = None) -> bool:
    return any((root or kit_root()).joinpath("tests", "hidden").glob("test_*.py"))
