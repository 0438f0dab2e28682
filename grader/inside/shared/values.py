"""`values` encodes a value as JSON plus named tensors for `protocol`'s messages, and rebuilds it on the other side.

Copied into the sandbox with `protocol`. What it decodes is untrusted: whatever does not decode to plain data,
within the limits below, raises ProtocolError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch

from .tensor_bytes import _DTYPE_NAMES, _DTYPES

MAX_DEPTH = 32
MAX_ITEMS = 100_000

_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class ProtocolError(Exception):
    """A message broke the protocol: malformed, too large, or holding a value we refuse."""


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
        self._count(1)
        return self._value(value, depth)

    def _count(self, items: int) -> None:
        self._items += items
        if self._items > MAX_ITEMS:
            raise ProtocolError(f"value holds more than {MAX_ITEMS} items")

    def _value(self, value: Any, depth: int) -> Any:
        """`value`, already counted, encoded; the plain types first, by identity (a `describe` is thousands)."""
        if depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        kind = type(value)
        if kind in _PLAIN:
            return value
        if kind is list:
            return self._items_of(value, depth + 1)
        if kind is dict:
            return self._dict(value, depth + 1)
        if kind is float:
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, (bool, str)):
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
            items = self._items_of(value, depth + 1)
            return items if type(value) is list else {"$tuple": items}
        if isinstance(value, dict):
            return self._dict(value, depth + 1)
        return self._on_object(value)

    def _items_of(self, values: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        """The items of a list or tuple, each at `depth`: plain ones as they are, without a call each."""
        self._count(len(values))
        if values and depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        return [item if type(item) in _PLAIN else self._value(item, depth) for item in values]

    def _dict(self, value: dict[Any, Any], depth: int) -> dict[str, Any]:
        self._count(len(value))
        if value and depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        return {"$dict": [[key if type(key) is str else self._key(key),
                           item if type(item) in _PLAIN else self._value(item, depth)] for key, item in value.items()]}

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
        self.tensors[key] = tensor.detach().to("cpu")  # no copy here: save_tensors reads each tensor's bytes
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
        kind = type(value)  # what json.loads makes, by identity first: a `describe` is thousands of them
        if kind in _SCALARS:
            return value
        if kind is list:
            return self._items_of(value, depth + 1)
        if isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return self._items_of(value, depth + 1)
        tag = _tag(value)
        payload = value[tag]
        if tag == "$dict":
            pairs = _list(payload)
            if not all(isinstance(pair, list) and len(pair) == 2 and type(pair[0]) in (str, int) for pair in pairs):
                raise ProtocolError("malformed dict entry in message")
            if pairs and depth + 1 > MAX_DEPTH:
                raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
            return {key: item if type(item) in _SCALARS else self.decode(item, depth + 1) for key, item in pairs}
        if tag == "$tensor":
            return self._tensor(value)
        if tag == "$tuple":
            return tuple(self._items_of(_list(payload), depth + 1))
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

    def _items_of(self, values: list[Any], depth: int) -> list[Any]:
        """The items of a list, each at `depth`: scalars as they are, without a call each."""
        if values and depth > MAX_DEPTH:
            raise ProtocolError(f"value is nested more than {MAX_DEPTH} levels deep")
        return [item if type(item) in _SCALARS else self.decode(item, depth) for item in values]

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


# What json.loads makes that holds nothing; and of those, what the Encoder sends as it is (a float may be nan).
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLAIN = frozenset({str, int, bool, type(None)})

# Each tag and the keys an object so tagged may hold.
_TAGS: dict[str, set[str]] = {
    "$tensor": {"$tensor", "device", "requires_grad"}, "$tuple": {"$tuple"}, "$dict": {"$dict"},
    "$float": {"$float"}, "$dtype": {"$dtype"}, "$device": {"$device"}, "$handle": {"$handle", "type", "kind"},
}


def _tag(value: Any) -> str:
    """The one tag of an encoded object, which holds no key its tag does not allow; else ProtocolError."""
    if isinstance(value, dict):
        for key in value:  # the Encoder writes the tag first; each allowed set holds one tag, so two fail below
            if key in _TAGS:
                if value.keys() <= _TAGS[key]:
                    return key
                break
    raise ProtocolError("malformed value in message")


def _shown(value: Any) -> str:
    """An untrusted value for a message: a short string's repr, else only its type (a repr may recurse)."""
    return repr(value[:40]) if isinstance(value, str) else f"of type {type(value).__name__}"


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError("malformed value in message")
    return value


def parse_device(text: Any) -> str:
    """Accept only "cpu", "cuda" and "cuda:N": a device string is data from the other side."""
    if isinstance(text, str) and re.fullmatch(r"cpu|cuda(:[0-9]{1,3})?", text):
        return text
    raise ProtocolError(f"unknown device {_shown(text)} in message")
