"""`rates` measures a module's dropouts by what it computes: how often each drops, and how it scales what it keeps.

A measurement is one round or a few, each as another test's calls would be: weights drawn as the contract module's
own are at the start, loaded by name; the module switched to eval mode and each part called on random inputs (where
its values without dropout are not computed here); then switched to training mode and each part called on the same
inputs. Each value read back (`tracers`, `head_traces`) is 0 (dropped) or its value without dropout times the scale
of whatever dropout kept it, however the dropout is spelled: `nn.Dropout`, `F.dropout(x, p, self.training)`, the
fused kernel's `dropout_p`, an inner module. The grader drives every call through the module's own methods, no kit
code runs in the worker for it, and composite modules are measured part by part (`parts`); the outputs are judged
here, in the trusted process.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

from grader.host.failures import SubmissionFailure
from grader.host.remote import Remote
from grader.judge import head_traces, tracers
from grader.judge.expect import hint_suffix
from grader.judge.structure import describe
from grader.judge.tracers import TARGET, Draw, Part, Setup, Tally, Trace, within
from grader.lang import tr

Module = torch.nn.Module | Remote


def measure(kind: str, module: Module, *, training: bool = True) -> Trace:
    """Trace `module`, a contract module of class `kind`, in training (or eval) mode; its weights are overwritten."""
    ((_, trace),) = traces((("", kind),), module, training=training, what=kind)
    return trace


SETUPS = {**tracers.SETUPS, "FeedForward": head_traces.feed_forward, "HeadAttention": head_traces.head,
          "MultiHeadAttention": head_traces.multi_head}
ROUNDS = 3  # a round that reads fewer values than TARGET (a module that drops more than asked, say) is followed by more


def traces(listed: tuple[tuple[str, str], ...], module: Module, *, training: bool = True,
           what: str) -> list[tuple[str, Trace]]:
    """Trace each listed part of `module` ((path for get_submodule, contract class), as `parts` gives), in
    training (or eval) mode; their weights are overwritten.

    Driven from here as any test drives a module: `describe` for the shapes, then in each round one
    `load_state_dict` for the weights of every part still short of values read, `eval()` and each part called whose
    reading needs its own values without dropout, `train()` and each part called on the same inputs (measured in eval
    mode: only `eval()` and the calls). No helper of the kit runs in the worker for it (a submission can rewrite one
    there to see that it is being measured); the outputs are judged here.
    """
    info = describe(module)
    parameters, buffers = _tensors(info.parameters), _tensors(info.buffers)  # the worker's word, checked once
    for path, _ in listed:
        if path and path not in info.classes:
            raise AssertionError(tr("{what} has no submodule {path}.", what=what, path=path)
                                 + hint_suffix(tr("use the attribute names of the docstring.")))
    get = module.get_submodule if any(path for path, _ in listed) else None
    handles = [get(path) if path and get is not None else module for path, _ in listed]
    setups = [SETUPS[kind](_part(parameters, buffers, path, kind, handle))
              for (path, kind), handle in zip(listed, handles, strict=True)]
    calls = [_Calls(handle, module) for handle in handles]
    tallies = [Tally(setup.kind, setup.chained) for setup in setups]
    seen: list[int | None] = [None] * len(listed)
    for round_ in range(ROUNDS):
        readings = [tally.trained if training else tally.evaluated for tally in tallies]
        todo = [i for i, reading in enumerate(readings)  # short of values, and the last round read more
                if reading.odd is None and reading.seen < TARGET and reading.seen != seen[i]]
        if not todo:
            break
        seen = [reading.seen for reading in readings]
        draws = {i: setups[i].draw() for i in todo}
        _load(module, parameters, listed, setups, draws, zero=round_ == 0)
        twins = [i for i in todo if setups[i].twin or not training]  # the others read against values computed here
        if twins:
            module.train(False)
        evaluated = {i: draws[i].call(calls[i]) for i in twins}
        trained: dict[int, object] = {}
        if training:
            module.train(True)
            trained = {i: draws[i].call(calls[i]) for i in todo}
        for i in todo:
            draws[i].read(evaluated.get(i), trained.get(i), tallies[i])
    return [(path, tally.trace(training)) for (path, _), tally in zip(listed, tallies, strict=True)]


def expect_dropout(kind: str, module: Module, p: float, *, what: str, hint: str = "", training: bool = True,
                   n_layers: int = 2) -> None:
    """Fail as feedback unless every dropout of `module` (a contract module of class `kind`, or each contract
    part of a composite one) acts with probability p in training mode, and none acts in eval mode."""
    what, hint = tr(what), tr(hint)  # the suites write English (grader.extract)
    for path, trace in traces(parts(kind, n_layers), module, training=training, what=what):
        where = f"{what}.{path}" if path else what
        if trace.twin is not None and trace.twin.dropping:  # its values in eval mode were not the ones without dropout
            expect_rate(trace.twin, 0.0, what=tr("{where} in eval mode", where=where), hint=hint)
        in_mode = (tr("{where} in training mode", where=where) if training
                   else tr("{where} in eval mode", where=where))
        expect_rate(trace, p if training else 0.0, what=in_mode, hint=hint)


def expect_rate(trace: Trace, p: float, *, what: str, hint: str) -> None:
    """Fail as feedback unless every dropout of the trace dropped with probability p and scaled by 1 / (1 - p)."""
    what, hint = tr(what), tr(hint)  # the suites write English (grader.extract)
    suffix = hint_suffix(hint)
    if trace.odd is not None:  # nothing measured: a hint about dropout would be a guess
        raise AssertionError(tr("{what}: {why}.", what=what, why=trace.odd))
    for site in trace.sites:
        if not within(site, p):
            fields = {"what": what, "dropped": site.dropped, "seen": site.seen, "site": tr(site.site),
                      "rate": format(site.rate, ".0%"), "p": p}
            if p == 0:
                message = tr("{what} dropped {dropped} of {seen} {site} ({rate}), where dropout with p = {p} drops "
                             "none.", **fields)
            else:
                message = tr("{what} dropped {dropped} of {seen} {site} ({rate}), where dropout with p = {p} drops "
                             "{about}.", about=tr("about {count} ({share})", count=format(site.seen * p, ".0f"),
                                                  share=format(p, ".0%")), **fields)
            raise AssertionError(message + suffix)
    want = (1 - p) ** -trace.chained
    if trace.scale is not None and abs(trace.scale - want) > 1e-3 * want:
        what_scales = ("1 / (1 - p)" if trace.chained == 1
                       else tr("(1 / (1 - p))^{n}, one 1 / (1 - p) per dropout", n=trace.chained))
        raise AssertionError(
            tr("{what} scaled the values it kept by {scale}, where dropout with p = {p} scales them by {factor} = "
               "{want}.", what=what, scale=format(trace.scale, ".4f"), p=p, factor=what_scales,
               want=format(want, ".4f"))
            + suffix)


def parts(kind: str, n_layers: int = 2) -> tuple[tuple[str, str], ...]:
    """The contract's parts of a module that hold dropout: (path for get_submodule, class), ('', kind) for a
    module that holds its own."""
    attention = "MultiHeadAttention"
    encoder_layer = (("self_attn", attention), ("feed_forward", "FeedForward"),
                     *((f"residual{i}", "ResidualConnection") for i in (1, 2)))
    decoder_layer = (("self_attn", attention), ("cross_attn", attention), ("feed_forward", "FeedForward"),
                     *((f"residual{i}", "ResidualConnection") for i in (1, 2, 3)))

    def stacked(prefix: str, layer: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return tuple((f"{prefix}layers.{i}.{path}", part) for i in range(n_layers) for path, part in layer)

    contracted = {
        "EncoderLayer": encoder_layer,
        "DecoderLayer": decoder_layer,
        "Encoder": stacked("", encoder_layer),
        "Decoder": stacked("", decoder_layer),
        "Transformer": (("pos", "PositionalEncoding"), *stacked("encoder.", encoder_layer),
                        *stacked("decoder.", decoder_layer)),
    }
    return contracted.get(kind, (("", kind),))


def _part(parameters: dict[str, dict[str, Any]], buffers: dict[str, dict[str, Any]], path: str, kind: str,
          handle: Module) -> Part:
    """What `describe` says the part at `path` is made of, every parameter under each of its names."""
    prefix = f"{path}." if path else ""
    own = {name[len(prefix):]: entry for primary, entry in parameters.items()
           for name in (primary, *entry.get("aliases", ())) if name.startswith(prefix)}
    own_buffers = {name[len(prefix):]: entry for name, entry in buffers.items() if name.startswith(prefix)}
    n_heads = None
    if kind == "MultiHeadAttention":
        with contextlib.suppress(AttributeError, SubmissionFailure):  # the setup says what is missing
            n_heads = handle.n_heads
    return Part(own, own_buffers, n_heads if type(n_heads) is int else repr(n_heads)[:40])


def _load(module: Module, parameters: dict[str, dict[str, Any]], listed: tuple[tuple[str, str], ...],
          setups: list[Setup], draws: dict[int, Draw], *, zero: bool) -> None:
    """Load the round's weights of every part drawn in one call, by their names from `module`; then, in the first
    round, zero each parameter of those parts that no weight names under any of its names (an extra bias would hide
    the trace), but the allowed."""
    owners = [(listed[i][0], setups[i], draw.weights) for i, draw in draws.items() if draw.weights is not None]
    weights = {_under(path, name): w for path, _, drawn in owners for name, w in drawn.items()}
    if not weights:
        return
    _, unexpected = _keys(module.load_state_dict(weights, strict=False))
    if unexpected:
        name = unexpected[0]
        path, kind = next(((path, kind) for path, kind in listed if not path or name.startswith(path + ".")),
                          listed[0])
        inside = sorted(n[len(path) + 1:] if path else n for n in parameters if not path or n.startswith(path))
        shown = name[len(path) + 1:] if path else name
        raise AssertionError(
            tr("{name} has no parameter or buffer {key}; its parameters start {names}.", name=kind, key=repr(shown),
               names=inside[:4] or tr("none"))
            + hint_suffix(tr("the grader loads weights by name: use the attribute names of the docstring.")))
    zeros = {}
    for primary, entry in parameters.items():
        names = (primary, *entry.get("aliases", ()))
        for path, setup, _ in owners if zero else ():
            inside = [n[len(path) + 1:] if path else n for n in names if not path or n.startswith(path + ".")]
            if inside and not any(n in weights for n in names) and not set(inside) & set(setup.allow):
                dtype = getattr(torch, str(entry.get("dtype")), None)
                zeros[primary] = torch.zeros(entry["shape"], dtype=dtype if isinstance(dtype, torch.dtype) else None)
    if zeros:
        module.load_state_dict(zeros, strict=False)


def _tensors(listed: object) -> dict[str, dict[str, Any]]:
    """The entries of `describe` whose shape is a list of sizes and whose names are strings: the worker's word."""
    if not isinstance(listed, dict):
        return {}
    kept = {}
    for name, entry in listed.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if isinstance(name, str) and isinstance(shape, list) and all(type(n) is int and 0 <= n < 2**31 for n in shape):
            aliases = entry.get("aliases")
            kept[name] = {**entry, "aliases": [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list)
                          else []}
    return kept


def _under(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _keys(result: object) -> tuple[list[str], list[str]]:
    """load_state_dict's (missing, unexpected), read defensively: names the module reports."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise AssertionError(tr("load_state_dict did not return its missing and unexpected keys"))
    missing, unexpected = ([str(name) for name in keys] if isinstance(keys, (list, tuple)) else [] for keys in result)
    return missing, unexpected


class _Calls:
    """A part as a round uses it: called, its buffers read, with the torch it lives with (a sublayer is built there)."""

    def __init__(self, part: Module, module: Module) -> None:
        self._part, self._module = part, module

    def __call__(self, *args: object) -> object:
        return self._part(*args)

    def buffer(self, name: str) -> object:
        return getattr(self._part, name)

    @functools.cached_property
    def torch(self) -> Any:
        if isinstance(self._module, Remote):
            return self._module._connection.import_module("torch")
        return torch
