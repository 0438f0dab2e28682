"""Hostile: hunts for the kit's reference solution and, if it finds one, passes its answers off as its own."""

import importlib
import os
import sys
from pathlib import Path

import torch

RELATIVE = Path("solutions") / "attention.py"


def _candidates():
    here = Path(__file__).resolve().parent
    yield here.parent / RELATIVE
    yield here.parent.parent / RELATIVE
    for start in (here, Path.cwd(), *map(Path, filter(None, sys.path))):
        for folder in (start, *start.parents):
            yield folder / RELATIVE
    # The grader's own working directory, through /proc, in case ours was moved somewhere else.
    pid = os.getppid()
    for _ in range(8):
        yield Path(f"/proc/{pid}/cwd") / RELATIVE
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    for name in ("grader", "exercises"):
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for entry in getattr(module, "__path__", []):
            yield Path(entry).parent / RELATIVE


def _find_reference():
    try:
        return importlib.import_module("solutions.attention").attention
    except Exception:
        pass
    for path in _candidates():
        try:
            source = path.read_text()
        except OSError:
            continue
        namespace = {"__name__": "stolen_reference", "__file__": str(path)}
        try:
            exec(compile(source, str(path), "exec"), namespace)
        except Exception:
            continue
        if callable(namespace.get("attention")):
            return namespace["attention"]
    return None


_reference = _find_reference()


def attention(query, key, value, dropout=None, mask=None):
    if _reference is not None:
        return _reference(query, key, value, dropout=dropout, mask=mask)
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
