"""`worker` imports a submission and runs, in its own sandboxed process, what the trusted side asks.

Forked by the `zygote` with torch already imported, and copied into the sandbox with it; it imports
only the standard library, torch and safetensors. Everything in this process is untrusted once the
submission is imported: the submission can rewrite any object here, so the trusted side believes
nothing it has not decoded and checked itself. What this file does is make honest mistakes easy to read.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
import types
from typing import Any

from .shared import TEST_MODULES

MAX_TRACEBACK_CHARS = 4000


def serve(fd_in: int, fd_out: int, *, limits: dict[str, int], threads: int) -> None:
    """Run in a freshly forked worker: bound it, say hello, then answer requests until hung up."""
    _limit_resources(limits)
    import torch

    torch.set_num_threads(threads)
    from .shared import protocol

    worker = Worker(protocol, torch)
    protocol.write_message(fd_out, {"id": 0, "ok": True, "value": worker.hello()}, {})
    while True:
        try:
            request, tensors = protocol.read_message(fd_in)
        except protocol.PeerClosed:
            return
        header, out_tensors = worker.handle(request, tensors)
        header["id"] = request.get("id")  # the trusted side takes no reply that does not echo its request's id
        protocol.write_message(fd_out, header, out_tensors)


def _limit_resources(limits: dict[str, int]) -> None:
    if not limits:
        return
    import resource  # not at module level: Windows has no `resource`, and the portable path sends no limits there

    for name, value in limits.items():
        kind = getattr(resource, name)
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(kind, (value, value))


class Worker:
    """Holds the submission's objects behind integer handles and serves requests on them."""

    def __init__(self, protocol: types.ModuleType, torch: types.ModuleType) -> None:
        self.protocol = protocol
        self.torch = torch
        self.objects: dict[int, Any] = {}
        self.ids: dict[int, int] = {}  # id(object) -> handle, so one object keeps one handle
        self.next_handle = 1
        self.instrument = importlib.import_module(f"{__package__}.shared.instrument")

    def hello(self) -> dict[str, Any]:
        # "warm": forked after the zygote's warm-up, so that fake tensors start at once (grader.judge.plugin's
        # warm_worker tests run where this is true)
        return {"pid": os.getpid(), "torch": self.torch.__version__, "cuda": self.torch.cuda.is_available(),
                "warm": "torch._subclasses.fake_tensor" in sys.modules and "torch._dynamo" in sys.modules}

    # --- requests ------------------------------------------------------------------------------

    def handle(self, request: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        encoder = self.protocol.Encoder(self._handle_of)
        try:
            if "release_first" in request:
                self.op_release({"keep": request["release_first"]}, None)
            if "seed_first" in request:  # the test's draws in the worker: the same in every grading of these files
                import random

                self.torch.manual_seed(int(request["seed_first"]))
                random.seed(int(request["seed_first"]))
            op = request.get("op")
            method = getattr(self, f"op_{op}", None)
            if method is None:
                raise ValueError(f"unknown request {op!r}")
            value = method(request, self._decoder(tensors))
            return {"ok": True, "value": encoder.encode(value)}, encoder.tensors
        except BaseException as error:  # the submission may raise anything, SystemExit included
            return {"ok": False, "error": self._describe(error)}, {}

    def op_import(self, request: dict[str, Any], decoder: Any) -> Any:
        name = str(request["name"])
        if name == "torch":
            return self.torch
        if name in TEST_MODULES:
            return importlib.import_module(f"{__package__}.shared.{name}")
        return importlib.import_module(f"exercises.{name}")

    def op_getattr(self, request: dict[str, Any], decoder: Any) -> Any:
        return getattr(self._object(request["target"]), str(request["name"]))

    def op_call(self, request: dict[str, Any], decoder: Any) -> Any:
        target = self._object(request["target"])
        if "method" in request:  # `module.eval()` in one request
            target = getattr(target, str(request["method"]))
        args = decoder.decode(request.get("args", []))
        kwargs = decoder.decode(request.get("kwargs", {"$dict": []}))
        mode = request.get("mode", "plain")
        if mode == "plain":
            return target(*args, **kwargs)
        if mode == "count_ops":  # the lines run in the submission's files too (staged as the package exercises)
            folders = tuple(os.path.join(folder, "") for folder in importlib.import_module("exercises").__path__)
            return self.instrument.count_ops(target, args, kwargs, lines_in=folders)
        if mode == "backward":
            grad_output = decoder.decode(request["grad_output"])
            return self.instrument.backward(target, args, kwargs, grad_output, request.get("output_index"))
        raise ValueError(f"unknown call mode {mode!r}")

    def op_describe(self, request: dict[str, Any], decoder: Any) -> Any:
        target = self._object(request["target"])
        torch = self.torch
        if not isinstance(target, torch.nn.Module):
            return {"type": _type_name(target), "is_module": False}
        persistent = set(target.state_dict(keep_vars=True).keys())
        classes: dict[type, list[str]] = {}  # each class's names once: a model has many Linears
        return {
            "type": _type_name(target),
            "is_module": True,
            "training": bool(target.training),
            # Each parameter once, under the first name it was registered by, with all its names (an alias,
            # `self.w1 = self.net[0]`, is one more name for the same weights).
            "parameters": {
                names[0]: _tensor_info(self.protocol, p) | {"requires_grad": bool(p.requires_grad), "names": names}
                for p, names in self.instrument.names_by_tensor(target)
            },
            "buffers": {
                name: _tensor_info(self.protocol, b) | {"persistent": name in persistent}
                for name, b in target.named_buffers()
            },
            # Aliases too (`self.attn_dropout = self.attention.dropout`), each with its classes up the MRO,
            # so that a subclass of nn.Embedding is seen as an Embedding.
            "modules": {name: _classes_of(type(m), classes)
                        for name, m in target.named_modules(remove_duplicate=False) if name},
        }

    def op_release(self, request: dict[str, Any], decoder: Any) -> Any:
        keep = set(request.get("keep", []))
        for handle in [h for h in self.objects if h not in keep]:
            obj = self.objects.pop(handle)
            self.ids.pop(id(obj), None)
        return len(self.objects)

    # --- handles -------------------------------------------------------------------------------

    def _handle_of(self, obj: Any) -> dict[str, Any]:
        handle = self.ids.get(id(obj))
        if handle is None or self.objects.get(handle) is not obj:
            handle = self.next_handle
            self.next_handle += 1
            self.objects[handle] = obj
            self.ids[id(obj)] = handle
        return {"$handle": handle, "type": _type_name(obj), "kind": _kind(self.torch, obj)}

    def _object(self, handle: Any) -> Any:
        if handle not in self.objects:
            raise LookupError(f"object {handle} no longer exists in the worker")
        return self.objects[handle]

    def _decoder(self, tensors: dict[str, Any]) -> Any:
        def place(tensor: Any, device: str, requires_grad: bool) -> Any:
            tensor = tensor.to(self.protocol.parse_device(device))
            return tensor.requires_grad_(True) if requires_grad else tensor

        def on_handle(value: dict[str, Any]) -> Any:
            return self._object(value["$handle"])

        return self.protocol.Decoder(tensors, on_handle, place=place)

    def _describe(self, error: BaseException) -> dict[str, Any]:
        frames = traceback.extract_tb(error.__traceback__)
        submitted = [f for f in frames if "/exercises/" in f.filename.replace(os.sep, "/")]
        where = None
        if submitted:
            frame = submitted[-1]
            where = {"file": os.path.basename(frame.filename), "line": frame.lineno, "function": frame.name,
                     "code": (frame.line or "").strip()}
        elif isinstance(error, SyntaxError) and error.filename:
            where = {"file": os.path.basename(error.filename), "line": error.lineno, "function": None,
                     "code": (error.text or "").strip()}
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return {
            "type": type(error).__name__,
            "message": _safe_str(error)[:2000],
            "where": where,
            "traceback": text[-MAX_TRACEBACK_CHARS:],
        }


def _tensor_info(protocol: types.ModuleType, tensor: Any) -> dict[str, Any]:
    return {"shape": list(tensor.shape), "dtype": protocol.dtype_name(tensor.dtype), "device": str(tensor.device)}


def _classes_of(cls: type, known: dict[type, list[str]]) -> list[str]:
    """The names of `cls` and the classes it derives from, in MRO order."""
    if cls not in known:
        known[cls] = [_type_name(base) for base in cls.__mro__]
    return known[cls]


def _type_name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _kind(torch: types.ModuleType, obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "package"
    if isinstance(obj, torch.nn.Module):
        return "module"
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "callable"
    return "object"


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose message could not be printed>"

