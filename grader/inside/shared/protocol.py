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
import os
import select
import struct
import time
from typing import Any

import torch

from .tensor_bytes import dtype_name, load_tensors, preflight, save_tensors
from .values import MAX_DEPTH, MAX_ITEMS, Decoder, Encoder, ProtocolError, parse_device

# Re-exported: a message's tensors (tensor_bytes) and values (values) are the protocol's too.
__all__ = ["MAX_DEPTH", "MAX_ITEMS", "Decoder", "Encoder", "ProtocolError", "dtype_name", "load_tensors",
           "parse_device", "preflight", "save_tensors"]

MAGIC = b"GRDR"
_PREFIX = struct.Struct("<4sQQ")

_WRITEV = hasattr(os, "writev")

MAX_JSON_BYTES = 16 * 2**20
MAX_BLOB_BYTES = 256 * 2**20



class PeerClosed(ProtocolError):
    """The other side closed its end of the pipe (it exited or crashed)."""


class Timeout(ProtocolError):
    """No complete message arrived before the deadline."""


# --- framing -----------------------------------------------------------------------------------


def write_message(fd: int, header: dict[str, Any], tensors: dict[str, torch.Tensor], *,
                  deadline: float | None = None) -> None:
    """Write one message; with a `deadline` (time.monotonic()), `fd` must be non-blocking.

    The trusted side writes with a deadline: a worker that stops reading (or fills its own
    request pipe through a second write end) must not stall the grader in a write.
    """
    body = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    blob = save_tensors(tensors) if tensors else b""
    # The blob goes out as it is (writev): joined to the header first, a model's weights would be copied once more.
    parts: list[bytes | memoryview] = [_PREFIX.pack(MAGIC, len(body), len(blob)) + body, blob]
    while parts:
        if deadline is not None and deadline <= time.monotonic():
            raise Timeout("the other side stopped reading before the deadline")
        try:
            # Windows has no writev: a part at a time there (where writes have no deadline, see grader.host.portable)
            written = os.writev(fd, parts) if _WRITEV else os.write(fd, parts[0])
        except BlockingIOError:  # the pipe is full: wait until it drains, within the deadline
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not select.select([], [fd], [], left)[1]:
                raise Timeout("the other side stopped reading before the deadline") from None
            continue
        parts = _unwritten(parts, written)


def _unwritten(parts: list[bytes | memoryview], written: int) -> list[bytes | memoryview]:
    """What is left of `parts` once a write took its first `written` bytes."""
    for index, part in enumerate(parts):
        if written < len(part):
            return [memoryview(part)[written:], *parts[index + 1:]]
        written -= len(part)
    return []


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
