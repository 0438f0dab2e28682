"""`protocol` moves plain data across the sandbox boundary: JSON headers and safetensors payloads.

This module is copied into the sandbox next to the worker, so it imports only the standard
library, torch and safetensors. Nothing here ever unpickles: a message is a JSON header plus a
safetensors blob, and every value is rebuilt from those by this module, so what arrives on the
trusted side is always plain data, whatever the sending process did to itself.

Wire format of one message: b"GRDR", JSON length (u64 LE), blob length (u64 LE), JSON, blob.
Each request carries an "id" (a counter per worker) and its reply echoes it; the worker's hello is id 0.
Everything that arrives from the worker is untrusted bytes: whatever does not decode, or decodes to
something other than the answer awaited, raises ProtocolError, and the trusted side then kills the worker.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import struct
import time
from collections.abc import Callable
from typing import Any

import torch
from safetensors.numpy import save as _save_arrays
from safetensors.torch import load as load_tensors
from safetensors.torch import save as _save_torch

MAGIC = b"GRDR"
_PREFIX = struct.Struct("<4sQQ")

MAX_JSON_BYTES = 16 * 2**20
MAX_BLOB_BYTES = 256 * 2**20
MAX_DEPTH = 32
MAX_ITEMS = 100_000

_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "bool", "uint8", "int8", "int16", "int32", "int64",
        "float16", "bfloat16", "float32", "float64",
    )
}
_DTYPE_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
_NUMPY_DTYPES = frozenset(_DTYPES.values()) - {torch.bfloat16}
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class ProtocolError(Exception):
    """A message broke the protocol: malformed, too large, or holding a value we refuse."""


class PeerClosed(ProtocolError):
    """The other side closed its end of the pipe (it exited or crashed)."""


class Timeout(ProtocolError):
    """No complete message arrived before the deadline."""


def save_tensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """The safetensors bytes of `tensors`: through numpy where every dtype has a numpy twin (bfloat16 has none).

    Same bytes, four times faster for a model's 70 small tensors: safetensors.torch checks each tensor for
    shared storage, which the Encoder's clones rule out anyway.
    """
    if all(tensor.dtype in _NUMPY_DTYPES and tensor.device.type == "cpu" for tensor in tensors.values()):
        return _save_arrays({name: tensor.detach().contiguous().numpy() for name, tensor in tensors.items()})
    return _save_torch(tensors)


def preflight() -> None:
    """Fail early, and say why, where this environment cannot move tensors at all."""
    try:
        load_tensors(save_tensors({"probe": torch.zeros(1)}))
    except ImportError as error:
        raise RuntimeError(f"safetensors cannot serialise tensors here ({error}): pip install numpy") from None


# --- framing -----------------------------------------------------------------------------------


def write_message(fd: int, header: dict[str, Any], tensors: dict[str, torch.Tensor], *,
                  deadline: float | None = None) -> None:
    """Write one message; with a `deadline` (time.monotonic()), `fd` must be non-blocking.

    The trusted side writes with a deadline: a worker that stops reading (or fills its own
    request pipe through a second write end) must not stall the grader in a write.
    """
    body = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    blob = save_tensors(tensors) if tensors else b""
    data = _PREFIX.pack(MAGIC, len(body), len(blob)) + body + blob
    view = memoryview(data)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise Timeout("the other side stopped reading before the deadline")
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[written:]


def read_message(
    fd: int,
    *,
    deadline: float | None = None,
    max_blob_bytes: int = MAX_BLOB_BYTES,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read one message; `deadline` is a time.monotonic() value, None waits forever."""
    magic, json_len, blob_len = _PREFIX.unpack(_read_exact(fd, _PREFIX.size, deadline))
    if magic != MAGIC:
        raise ProtocolError("message does not start with the protocol's magic bytes")
    if json_len > MAX_JSON_BYTES:
        raise ProtocolError(f"message header of {json_len} bytes is over the {MAX_JSON_BYTES} limit")
    if blob_len > max_blob_bytes:
        raise ProtocolError(
            f"tensor payload of {blob_len / 2**20:.0f} MiB is over the {max_blob_bytes / 2**20:.0f} MiB limit"
        )
    try:
        header = json.loads(_read_exact(fd, json_len, deadline))
    except ValueError as error:
        raise ProtocolError(f"message header is not valid JSON: {error}") from None
    except RecursionError:  # the parser recurses once per level: a deep frame must not escape as an error of ours
        raise ProtocolError("message header is nested too deep") from None
    except MemoryError:
        raise ProtocolError("message header is too big to parse") from None
    if not isinstance(header, dict):
        raise ProtocolError("message header is not a JSON object")
    blob = _read_exact(fd, blob_len, deadline) if blob_len else b""
    try:
        tensors = load_tensors(blob) if blob else {}
    except Exception as error:  # safetensors raises its own error types for malformed input
        raise ProtocolError(f"tensor payload is not valid safetensors: {error}") from None
    return header, tensors


def check_reply(header: dict[str, Any], request_id: int) -> None:
    """Refuse a reply that does not answer request `request_id`: a stale or forged one, or one of no known shape.

    An answer is {"id", "ok": true, "value"}; a failure {"id", "ok": false, "error": {...}} whose fields
    are the plain strings and numbers the worker's `_describe` writes, so that reading them cannot recurse.
    """
    got = header.get("id")
    if type(got) is not int or got != request_id:
        shown = got if type(got) is int else "none" if got is None else f"a {type(got).__name__}"
        raise ProtocolError(f"a reply with id {shown} arrived where the reply to request {request_id} was due")
    if header.get("ok") is True and "value" in header:
        return
    error = header.get("error")
    if header.get("ok") is not False or not isinstance(error, dict):
        raise ProtocolError("a reply that is neither an answer nor an error")
    where = error.get("where")
    fields = [value for key, value in error.items() if key != "where"]
    fields += where.values() if isinstance(where, dict) else [where]
    if not all(value is None or type(value) in (str, int) for value in fields):
        raise ProtocolError("an error report with fields that are not plain text or numbers")


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Timeout("no answer before the deadline")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerClosed("the other side closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


# --- values ------------------------------------------------------------------------------------
# Every JSON object in an encoded value is tagged with exactly one "$" key, so decoding is
# unambiguous: plain dicts travel as {"$dict": [[key, value], ...]}.


class Encoder:
    """Turns a value into JSON plus named tensors; `on_object` encodes anything else (a handle)."""

    def __init__(self, on_object: Callable[[Any], dict[str, Any]]) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._on_object = on_object
        self._items = 0

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        self._items += 1
        if self._items > MAX_ITEMS:
            raise ProtocolError(f"value holds more than {MAX_ITEMS} items")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else {"$float": repr(float(value))}
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, torch.dtype):
            if value not in _DTYPE_NAMES:
                raise ProtocolError(f"dtype {value} cannot cross the sandbox boundary")
            return {"$dtype": _DTYPE_NAMES[value]}
        if isinstance(value, torch.device):
            return {"$device": str(value)}
        if isinstance(value, (tuple, list)):
            items = [self.encode(item, depth + 1) for item in value]
            return items if type(value) is list else {"$tuple": items}
        if isinstance(value, dict):
            return {"$dict": [[self._key(key), self.encode(item, depth + 1)] for key, item in value.items()]}
        return self._on_object(value)

    def _key(self, key: Any) -> str | int:
        if isinstance(key, (str, int)) and not isinstance(key, bool):
            return key
        raise ProtocolError(f"dict key {type(key).__name__} cannot cross the sandbox boundary")

    def _tensor(self, tensor: torch.Tensor) -> dict[str, Any]:
        if type(tensor) not in _PLAIN_TENSOR_TYPES:
            raise ProtocolError(
                f"got a {type(tensor).__name__}, a subclass of torch.Tensor: return a plain torch.Tensor"
            )
        if tensor.layout != torch.strided or tensor.is_meta:
            raise ProtocolError(f"a {tensor.layout} tensor cannot cross the sandbox boundary: use a dense tensor")
        if tensor.dtype not in _DTYPE_NAMES:
            raise ProtocolError(f"dtype {tensor.dtype} cannot cross the sandbox boundary")
        key = f"t{len(self.tensors)}"
        # clone: safetensors refuses tensors that share storage, such as two views of one tensor.
        self.tensors[key] = tensor.detach().to("cpu").clone(memory_format=torch.contiguous_format)
        return {"$tensor": key, "device": str(tensor.device), "requires_grad": bool(tensor.requires_grad)}


class Decoder:
    """Rebuilds values from JSON plus named tensors; `on_handle` turns {"$handle": ...} into an object."""

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        on_handle: Callable[[dict[str, Any]], Any],
        *,
        place: Callable[[torch.Tensor, str, bool], torch.Tensor],
    ) -> None:
        self._tensors = tensors
        self._on_handle = on_handle
        self._place = place

    def decode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.decode(item, depth + 1) for item in value]
        tag = next((key for key in _TAGS if isinstance(value, dict) and key in value), None)
        if tag is None or not set(value) <= _TAGS[tag]:
            raise ProtocolError("malformed value in message")
        payload = value[tag]
        if tag == "$tensor":
            return self._tensor(value)
        if tag == "$tuple":
            return tuple(self.decode(item, depth + 1) for item in _list(payload))
        if tag == "$dict":
            pairs = [_pair(pair) for pair in _list(payload)]
            return {key: self.decode(item, depth + 1) for key, item in pairs}
        if tag == "$float":
            if not isinstance(payload, str) or payload not in ("nan", "inf", "-inf"):
                raise ProtocolError("malformed float in message")
            return float(payload)
        if tag == "$dtype":
            if not isinstance(payload, str) or payload not in _DTYPES:
                raise ProtocolError(f"unknown dtype {_shown(payload)} in message")
            return _DTYPES[payload]
        if tag == "$device":
            return torch.device(parse_device(payload))
        if type(payload) is not int or not all(isinstance(value.get(key, ""), str) for key in ("type", "kind")):
            raise ProtocolError("malformed handle in message")
        return self._on_handle(value)

    def _tensor(self, value: dict[str, Any]) -> torch.Tensor:
        key, device, requires_grad = value["$tensor"], value.get("device", "cpu"), value.get("requires_grad", False)
        if not isinstance(key, str) or not isinstance(device, str) or not isinstance(requires_grad, bool):
            raise ProtocolError("malformed tensor in message")
        if key not in self._tensors:
            raise ProtocolError(f"message refers to a missing tensor {_shown(key)}")
        tensor = self._tensors[key]
        if type(tensor) is not torch.Tensor or tensor.dtype not in _DTYPE_NAMES:
            raise ProtocolError("tensor payload did not decode to a plain torch.Tensor of a known dtype")
        return self._place(tensor, parse_device(device), requires_grad)


# Each tag and the keys an object so tagged may hold.
_TAGS: dict[str, set[str]] = {
    "$tensor": {"$tensor", "device", "requires_grad"}, "$tuple": {"$tuple"}, "$dict": {"$dict"},
    "$float": {"$float"}, "$dtype": {"$dtype"}, "$device": {"$device"}, "$handle": {"$handle", "type", "kind"},
}


def _shown(value: Any) -> str:
    """An untrusted value for a message: a short string's repr, else only its type (a repr may recurse)."""
    return repr(value[:40]) if isinstance(value, str) else f"of type {type(value).__name__}"


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError("malformed value in message")
    return value


def _pair(value: Any) -> tuple[str | int, Any]:
    if not (isinstance(value, list) and len(value) == 2 and type(value[0]) in (str, int)):
        raise ProtocolError("malformed dict entry in message")
    return value[0], value[1]


def parse_device(text: Any) -> str:
    """Accept only "cpu", "cuda" and "cuda:N": a device string is data from the other side."""
    if isinstance(text, str) and re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", text):
        return text
    raise ProtocolError(f"unknown device {_shown(text)} in message")


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype))
