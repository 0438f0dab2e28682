"""`stored` keeps each exercise's observed catalogue (`compare.known_facets`) on disk, so that a diagnosis runs the
catalogue's scenarios once per kit, not once per process: a student's checks, `grader watch` and every slot of a
batch read what the first of them computed (the Decoder's and the Transformer's take seconds each).

Kept in the user's cache folder (platformdirs: `~/.cache/attention-kit/facets` on Linux), readable by this user
alone, and written by the trusted side only, whole or not at all. A file is named by a digest of everything the
facets follow: the kit's sources (`grader.sources`: its code, the catalogue and the translations among them),
torch's version, the machine and the device; a file that is missing, does not read or does not hold what its name
promises is computed again, never trusted in part. The tensors go in a safetensors file and the rest in its JSON
metadata: plain data, never a pickle.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import platformdirs
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from grader import sources
from grader.judge.diagnosis.observe import FacetValue, Raised
from grader.kit import VERSION

FORMAT = 1  # of the files below; a change makes every file of another format a miss


@cache
def folder() -> Path:
    return Path(platformdirs.user_cache_dir("attention-kit", appauthor=False)) / "facets"


@cache
def _digest(device: str) -> str:
    """What the facets of this kit follow: its sources, torch, the machine and the device."""
    kit = sources.digest()
    return hashlib.sha256(f"{FORMAT}\0{VERSION}\0{torch.__version__}\0{platform.machine()}\0{device}\0{kit}".encode()
                          ).hexdigest()[:32]


def _path(exercise: str, device: str) -> Path:
    return folder() / f"{exercise}-{_digest(device)}.safetensors"


def load(exercise: str, device: str) -> dict[str, Any] | None:
    """What `save` kept for `exercise` on `device` with this kit, or None (missing, unreadable or not this kit's)."""
    try:
        with safe_open(_path(exercise, device), framework="pt") as file:
            metadata = json.loads(file.metadata()["facets"])
            tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118 - not a dict
        if metadata.get("exercise") != exercise or metadata.get("device") != device:
            return None
        return _decode(metadata["data"], tensors)
    except Exception:  # anything amiss is a miss: the facets are computed again
        return None


def save(exercise: str, device: str, data: dict[str, Any]) -> None:
    """Keep `data` (facets: tensors, tuples, Raised and plain values) for `exercise`; a folder that cannot be written
    only means the next process computes them again."""
    tensors: dict[str, torch.Tensor] = {}
    try:
        metadata = {"exercise": exercise, "device": device, "data": _encode(data, tensors)}
    except TypeError:  # a facet that is not plain data: kept in this process only
        return
    with contextlib.suppress(OSError):
        folder().mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder(), prefix=".facets-", suffix=".tmp")  # mode 0600
        os.close(handle)
        try:
            save_file(tensors, temporary, metadata={"facets": json.dumps(metadata)})
            os.replace(temporary, _path(exercise, device))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def _encode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = value.detach().cpu().contiguous().clone()
        return {"tensor": key}
    if isinstance(value, Raised):
        return {"raised": value.error}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, tensors) for v in value]}
    if isinstance(value, list):
        return [_encode(v, tensors) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): _encode(v, tensors) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a facet of type {type(value).__name__} cannot be stored")


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> FacetValue | Any:
    if isinstance(value, dict):
        if "tensor" in value:
            return tensors[value["tensor"]]
        if "raised" in value:
            return Raised(value["raised"])
        if "tuple" in value:
            return tuple(_decode(v, tensors) for v in value["tuple"])
        return {k: _decode(v, tensors) for k, v in value["dict"].items()}
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    return value
