"""`rates` measures a module's dropouts by what it computes: how often each drops, and how it scales what it keeps.

Each contract module gets weights that turn its output into a trace of its dropouts: a feed-forward whose
hidden units are all 1 and whose w2 copies them out, attention whose scores are all equal and whose
values are ones. Every output is then 0 (dropped) or a known value times the scale of whatever dropout
kept it, so the trace shows how many were dropped at each place and by what the rest were scaled,
however the dropout is spelled: `nn.Dropout`, `F.dropout(x, p, self.training)`, the fused kernel's
`dropout_p`, an inner module. Composite modules are measured part by part (`parts`), all parts in two
requests to the worker: it loads the tracing weights and calls each part (`probes.run_traced`), and the
outputs are judged here, in the trusted process.
"""

from __future__ import annotations

from typing import Any

import torch

from grader.host.remote import Remote
from grader.inside.shared import probes
from grader.judge.tracers import SETUPS, Trace, part_info, within

Module = torch.nn.Module | Remote


def measure(kind: str, module: Module, *, training: bool = True) -> Trace:
    """Trace `module`, a contract module of class `kind`, in training (or eval) mode; its weights are overwritten."""
    ((_, trace),) = traces((("", kind),), module, training=training, what=kind)
    return trace


def traces(listed: tuple[tuple[str, str], ...], module: Module, *, training: bool = True,
           what: str) -> list[tuple[str, Trace]]:
    """Trace each listed part of `module` ((path for get_submodule, contract class), as `parts` gives), in
    training (or eval) mode; their weights are overwritten.

    Two requests to a sandboxed module whatever the number of parts (`probes.parts_of`, `probes.run_traced`):
    the worker loads the tracing weights and calls each part; the outputs are judged here.
    """
    probes = _probes(module)
    found = probes.parts_of(module, [path for path, _ in listed])
    if not isinstance(found, list) or len(found) != len(listed):
        raise AssertionError(f"{what}: the parts could not be listed")
    jobs, judges = [], []
    for (path, kind), info in zip(listed, found, strict=True):
        if not isinstance(info, dict):
            raise AssertionError(f"{what} has no submodule {path}. Hint: use the attribute names of the docstring.")
        job, judge = SETUPS[kind](part_info(info))
        jobs.append({"path": path, "training": training, "weights": None, "allow": [], **job})
        judges.append(judge)
    results = probes.run_traced(module, jobs)
    if not isinstance(results, list) or len(results) != len(jobs):
        raise AssertionError(f"{what}: the parts could not be called")
    return [(path, judge(_outputs(result, kind, info)))
            for (path, kind), judge, result, info in zip(listed, judges, results, found, strict=True)]


def expect_dropout(kind: str, module: Module, p: float, *, what: str, hint: str = "", training: bool = True,
                   n_layers: int = 2) -> None:
    """Fail as feedback unless every dropout of `module` (a contract module of class `kind`, or each contract
    part of a composite one) acts with probability p in training mode, and none acts in eval mode."""
    mode = "in training mode" if training else "in eval mode"
    for path, trace in traces(parts(kind, n_layers), module, training=training, what=what):
        where = f"{what}.{path}" if path else what
        expect_rate(trace, p if training else 0.0, what=f"{where} {mode}", hint=hint)


def expect_rate(trace: Trace, p: float, *, what: str, hint: str) -> None:
    """Fail as feedback unless every dropout of the trace dropped with probability p and scaled by 1 / (1 - p)."""
    suffix = f" Hint: {hint}" if hint else ""
    if trace.odd is not None:
        raise AssertionError(f"{what}: {trace.odd}.{suffix}")
    for site in trace.sites:
        if not within(site, p):
            expected = site.seen * p
            about = "none" if p == 0 else f"about {expected:.0f} ({p:.0%})"
            raise AssertionError(f"{what} dropped {site.dropped} of {site.seen} {site.site} ({site.rate:.0%}), "
                                 f"where dropout with p = {p} drops {about}.{suffix}")
    want = (1 - p) ** -trace.chained
    if trace.scale is not None and abs(trace.scale - want) > 1e-3 * want:
        what_scales = ("1 / (1 - p)" if trace.chained == 1
                       else f"(1 / (1 - p))^{trace.chained}, one 1 / (1 - p) per dropout")
        raise AssertionError(f"{what} scaled the values it kept by {trace.scale:.4f}, where dropout with p = {p} "
                             f"scales them by {what_scales} = {want:.4f}.{suffix}")


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


def _probes(module: Module) -> Any:
    """The probes module where `module` lives: the worker's for a sandboxed module, this process's otherwise."""
    if isinstance(module, Remote):
        module._check_alive()
        return module._connection.import_module("probes")
    return probes


def _outputs(result: object, kind: str, info: dict[str, Any]) -> list[object]:
    """A part's outputs from `probes.run_traced`, failing as feedback on weight names the part lacks."""
    if isinstance(result, dict) and isinstance(result.get("unexpected"), list) and result["unexpected"]:
        have = sorted(part_info(info).parameters)[:4] or "none"
        raise AssertionError(f"{kind} has no parameter or buffer {str(result['unexpected'][0])!r}; its parameters "
                             f"start {have}. Hint: the grader loads weights by name: use the attribute names of "
                             "the docstring.")
    outputs = result.get("outputs") if isinstance(result, dict) else None
    if not isinstance(outputs, list) or not outputs:
        raise AssertionError(f"{kind} gave no output")
    return outputs


