"""`remote` lets trusted tests use the sandboxed submission as if it were ordinary PyTorch.

`impl.attention.attention(q, k, v)` sends a request to the worker (through a `Connection`) and
returns plain tensors; objects that cannot travel (modules, classes, functions) stay in the worker
and come back as `Remote` handles.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from grader.host.failures import SubmissionFailure, WorkerCrash
from grader.lang import tr
from grader.markers import hint_suffix

# Public methods every nn.Module has (`module.eval()`, `module.to(device)`, `module.load_state_dict(weights)`):
# on a module's handle, these names are taken for its methods without asking the worker.
MODULE_METHODS = frozenset(name for name, value in vars(torch.nn.Module).items()
                           if callable(value) and not name.startswith("_"))


class Link(Protocol):
    """What a handle asks of the connection it came through, `connection.Connection`: the worker's generation
    (a handle dies with its worker), and the requests that reach it. Named here so that remote.py, whose handles
    the connection makes, does not import the connection back."""

    generation: int
    process: object | None  # the worker: None once it is gone

    def request(self, header: dict[str, Any], tensors: dict[str, torch.Tensor], *, what: str) -> Any: ...

    def module_attribute(self, module: Remote, name: str) -> Any: ...

    def call(self, target: Remote, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    def import_module(self, name: str) -> Remote: ...


class Remote:
    """A handle on an object that lives in the worker; attribute access and calls go there.

    A handle with a `_method` stands for that method of the module `_handle`: the worker looks it up in the
    request that calls it (one round trip, not two), or, for any other use, first on its own (`_resolved`).
    """

    __slots__ = ("_connection", "_generation", "_handle", "_kind", "_method", "_name")

    def __init__(self, connection: Link, handle: int, generation: int, name: str, kind: str, *,
                 method: str | None = None) -> None:
        self._connection = connection
        self._handle = handle
        self._generation = generation
        self._name = name
        self._kind = kind
        self._method = method

    def _check_alive(self) -> None:
        if self._generation != self._connection.generation or self._connection.process is None:
            raise WorkerCrash(tr("{name} was lost when the worker restarted after an earlier failure", name=self._name))

    def _resolved(self) -> Remote:
        """This handle, its method looked up in the worker first if it has one: to be used other than by a call."""
        if self._method is None:
            return self
        self._check_alive()
        value = self._connection.request(
            {"op": "getattr", "target": self._handle, "name": self._method}, {}, what=self._name
        )
        if not isinstance(value, Remote):
            raise SubmissionFailure(
                tr("{name} should be the method every torch.nn.Module has, got a {type}.", name=self._name,
                   type=type(value).__name__) + hint_suffix(tr("give your attribute a name nn.Module does not use")))
        self._handle, self._kind, self._method = value._handle, value._kind, None
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._check_alive()
        if self._method is not None:
            return getattr(self._resolved(), name)
        if self._kind == "module" and name in MODULE_METHODS:
            return Remote(self._connection, self._handle, self._generation, f"{self._name}.{name}", "callable",
                          method=name)
        if self._kind == "package":
            value = self._connection.module_attribute(self, name)
        else:
            value = self._connection.request(
                {"op": "getattr", "target": self._handle, "name": name}, {}, what=f"{self._name}.{name}"
            )
        if isinstance(value, Remote) and value._kind in ("callable", "class", "package"):
            value._name = f"{self._name}.{name}"
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._check_alive()
        return self._connection.call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<{self._name} in the sandboxed submission>"


class RemoteSubmission:
    """The `impl` fixture: `impl.attention` is the submission's attention.py, imported in the worker."""

    def __init__(self, connection: Link) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Remote:
        if name.startswith("_"):
            raise AttributeError(name)
        module = self._connection.import_module(name)
        module._name = name
        return module

    def __repr__(self) -> str:
        return "<the sandboxed submission>"
