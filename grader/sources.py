"""`sources` names the kit's files whose bytes can change a grade or a word of feedback, and digests them: what a
batch's stored reports, a Dask worker's kit and the stored diagnosis facets must all follow, said once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from grader.kit import kit_root
from grader.lang import DOMAINS

CODE_FOLDERS = ("grader", "solutions")  # the grader, the references and the catalogue of mistakes
STAGED = ("__init__.py", "config.py")  # exercises/'s files staged beside every submission


def files(root: Path | None = None) -> list[Path]:
    """The grader's and the solutions' code, every message catalog (.po) and the exercise files staged beside each
    submission, sorted. Not the translated stubs in a locale folder: a release leaves them out, and a checkout and
    the autograder bundle built from it must grade alike."""
    root = root or kit_root()
    code = [path for folder in CODE_FOLDERS for path in (root / folder).rglob("*.py")
            if "locale" not in path.relative_to(root).parts]
    catalogs = [path for folder in DOMAINS.values() for path in (root / folder).glob("*/LC_MESSAGES/*.po")]
    staged = [root / "exercises" / name for name in STAGED if (root / "exercises" / name).is_file()]
    return sorted({*code, *catalogs, *staged})


def digest(root: Path | None = None) -> str:
    """sha256 over each of `files`: its path in the kit and its bytes' own digest."""
    root = root or kit_root()
    total = hashlib.sha256()
    for path in files(root):
        total.update(path.relative_to(root).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()
