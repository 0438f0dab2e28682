"""The vectorisation reader (`grader.judge.loops`) on source text: what it refuses, naming the line, and what it
accepts, in-process and in milliseconds.

The reader is an allow-list: each attack in `submissions/forgery/vectorised_*` is refused on the line that hides
its loop, the honest loop too; every correct masking variant, the reference and the correct forms a student
writes (`map(int, x.shape)`, `@lru_cache`, a generator over a parameter's `.shape`, the annotated Transformer's
`subsequent_mask`) are accepted. Names are resolved by Python's scope rules, so a local variable named like its
function is a variable and a function that calls itself is recursion. `test_forged_verdicts.py` grades the
attacks for real.
"""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path

import pytest
import torch

from grader.inside.shared import instrument
from grader.judge import variants
from grader.judge.loops import Refusal, python_loops

REPO = Path(__file__).resolve().parents[2]
FORGERY = Path(__file__).resolve().parent / "submissions" / "forgery"

# attack folder: the text of a line the reader must name (each attack's own trick)
ATTACK_LINES = {
    "vectorised_by_forged_count": "for t in range(x.size(1)):",
    "vectorised_by_itertools_alias": "sums = list(it.accumulate(x.unbind(1)))",
    "vectorised_loop_in_a_static_method": "for b in rows:",
    "vectorised_loop_in_an_operator": "def __rmatmul__(self, x):",
    "vectorised_redefined_inside_an_if": "if True:",
    "vectorised_redefined_under_a_forged_main": '__name__ = "__main__"',
    "vectorised_redefined_by_an_annotation": "def _unused(a: exec(_LOOP, globals())):",
    "vectorised_loop_over_a_forged_shape": "for _ in x.new_empty([1] * x.size(1)).shape:",
    "vectorised_by_a_bound_method_callback": "sorted(range(x.size(1)), key=running.step)",
}

# Another function of the contract, so that an accepted source reads like a whole masking.py.
OTHERS = '''

def weight_mask_and_normalization(weight):
    T = weight.size(-1)
    keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()
    return weight.masked_fill(~keep, float("-inf")).softmax(dim=-1)
'''


def read(source: str, **modules: str) -> list[Refusal]:
    """The reader's refusals for masking.causal_average, `source` being masking.py and `modules` other files."""
    files = {f"{name}.py": textwrap.dedent(text).encode() for name, text in {"masking": source, **modules}.items()}
    return python_loops(files, "masking", "causal_average")


def line_of(source: str, text: str) -> int:
    lines = [number for number, line in enumerate(textwrap.dedent(source).splitlines(), start=1)
             if line.strip().startswith(text)]
    assert len(lines) == 1, f"{text!r} is on lines {lines}"
    return lines[0]


def shown(refusals: list[Refusal]) -> str:
    return "\n".join(map(str, refusals)) or "(nothing refused)"


# Attacks with nothing for the reader to refuse (no loop, and no code run per position, in the source): a loop
# written out line by line. The operation count, bounded far below the longer length drawn, catches them
# (test_forged_verdicts grades them).
COUNTED = {"vectorised_by_an_unrolled_padded_loop"}


def test_every_vectorised_attack_folder_has_its_line_here():
    assert {p.name for p in FORGERY.iterdir() if p.name.startswith("vectorised_")} == set(ATTACK_LINES) | COUNTED


@pytest.mark.parametrize("attack", sorted(ATTACK_LINES))
def test_each_attack_is_refused_on_the_line_of_its_trick(attack: str):
    source = (FORGERY / attack / "masking.py").read_text()
    refusals = read(source)
    line = line_of(source, ATTACK_LINES[attack])
    assert line in {r.line for r in refusals}, f"{attack}: line {line} is not named in\n{shown(refusals)}"


def test_the_honest_loop_is_refused_with_its_line_and_a_hint():
    mistake = next(m for m in variants.mistakes("masking") if m.name == "loop_over_positions")
    refusals = read(mistake.source)
    assert len(refusals) == 1, shown(refusals)
    refusal = refusals[0]
    assert (refusal.file, refusal.line) == ("masking.py", line_of(mistake.source, "for t in range(x.size(1)):"))
    assert str(refusal).startswith(f"masking.py line {refusal.line}: a for loop over range(x.size(1))")
    assert "weights @ x" in refusal.hint


@pytest.mark.parametrize("variant", variants.correct_variants("masking"), ids=lambda v: v.name)
def test_every_correct_variant_is_accepted(variant: variants.Variant):
    assert read(variant.source) == [], shown(read(variant.source))


def test_the_reference_is_accepted():
    source = (REPO / "solutions" / "masking.py").read_text()
    assert read(source) == [], shown(read(source))


ACCEPTED = {
    "map(int, x.shape)": """
        import torch

        def causal_average(x):
            B, T, C = map(int, x.shape)
            return torch.ones(T, T, dtype=x.dtype, device=x.device).tril().div(torch.arange(1, T + 1).view(T, 1)) @ x
        """,
    "a bare @lru_cache, imported from functools": """
        from functools import lru_cache
        import torch

        @lru_cache
        def _weights(T, dtype, device):
            w = torch.ones(T, T, dtype=dtype, device=device).tril()
            return w / w.sum(dim=1, keepdim=True)

        def causal_average(x):
            return _weights(x.size(1), x.dtype, x.device) @ x
        """,
    "@functools.lru_cache(maxsize=None) and @torch.no_grad()": """
        import functools
        import torch

        @functools.lru_cache(maxsize=None)
        def _weights(T, dtype, device):
            w = torch.ones(T, T, dtype=dtype, device=device).tril()
            return w / w.sum(dim=1, keepdim=True)

        @torch.no_grad()
        def causal_average(x):
            return _weights(x.size(1), x.dtype, x.device) @ x
        """,
    "tuple constants and a seed at the top": """
        import torch

        NEG_INF, ONE = float("-inf"), 1.0
        torch.manual_seed(1337)
        DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

        def causal_average(x):
            T = x.size(1)
            scores = torch.zeros(T, T, dtype=x.dtype, device=x.device)
            scores = scores.masked_fill(torch.ones(T, T, device=x.device).tril() == 0, NEG_INF)
            return scores.softmax(dim=-1) * ONE @ x
        """,
    "a generator over a helper's parameter's .shape": """
        import torch

        def _check(x):
            assert x.dim() == 3 and all(n > 0 for n in x.shape), "x must be (B, T, C)"
            for n in x.shape[1:]:
                assert n > 0

        def causal_average(x):
            _check(x)
            *batch, T, C = x.size()
            return x.cumsum(dim=1) / torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(1, T, 1)
        """,
    "the annotated Transformer's subsequent_mask": """
        import torch

        def subsequent_mask(size):
            "Mask out subsequent positions."
            attn_shape = (1, size, size)
            subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
            return subsequent_mask == 0

        def causal_average(x):
            weights = subsequent_mask(x.size(1))[0].to(device=x.device, dtype=x.dtype)
            return weights / weights.sum(dim=-1, keepdim=True) @ x
        """,
    "annotations: types, Optional, a string, -> None": """
        from __future__ import annotations
        from typing import Optional
        import torch
        from torch import Tensor

        def _check(x: Tensor, name: Optional[str] = None, dims: tuple[int, ...] | None = None) -> None:
            if x.dim() != 3:
                raise ValueError(f"{name} must be (B, T, C), got {tuple(x.shape)}")

        def causal_average(x: "torch.Tensor") -> torch.Tensor:
            _check(x, "x")
            T = x.shape[1]
            return torch.ones(T, T, dtype=x.dtype, device=x.device).tril().softmax(dim=-1) @ x
        """,
    "course notes version 3 with F.softmax in float32, a with block, a nested helper": """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def causal_average(x):
            B, T, C = x.shape

            def scores(n):
                return torch.zeros(n, n, dtype=torch.float32, device=x.device)

            with torch.no_grad():
                wei = scores(T).masked_fill(torch.tril(torch.ones(T, T, device=x.device)) == 0, float("-inf"))
            wei = F.softmax(wei.float(), dim=-1).type_as(x)
            low = torch.finfo(x.dtype).min
            blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            wei = wei.masked_fill(blocked, low).to(torch.float32)
            if T == 1:
                return x.clone()
            return nn.functional.dropout(wei, p=0.0) @ x
        """,
    "a helper from another submission file": """
        import torch
        from .helpers import averaging_weights

        def causal_average(x):
            return averaging_weights(x.size(1)).to(x) @ x
        """,
    "an unused class and demo code at the top": """
        import torch
        from torch import nn

        class CausalAverage(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, x):
                return causal_average(x)

        def causal_average(x):
            T = x.size(1)
            return torch.ones(T, T, dtype=x.dtype, device=x.device).tril().softmax(dim=-1) @ x

        print(causal_average(torch.randn(2, 4, 3)).shape)
        """,
    "a class the function builds, its methods called, an f-string in a print": """
        import torch
        from torch import nn

        class _Average(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = 1.0

            def weights(self, T, like):
                w = torch.ones(T, T, dtype=like.dtype, device=like.device).tril()
                return w / w.sum(dim=1, keepdim=True) * self.scale

            def forward(self, x):
                return self.weights(x.size(1), x) @ x

        def causal_average(x):
            average = _Average()
            assert isinstance(average, (_Average, nn.Module)), f"not a module: {average}"
            print(f"averaging {tuple(x.shape)}")
            return average.forward(x)
        """,
    "an nn.Module with a tril buffer, nanoGPT's way": """
        import torch
        from torch import nn

        class CausalAverage(nn.Module):
            def __init__(self, block_size: int = 64):
                super().__init__()
                self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

            def forward(self, x):
                B, T, C = x.shape
                wei = self.tril[:T, :T].to(x)
                return wei / wei.sum(dim=-1, keepdim=True) @ x

        def causal_average(x):
            return CausalAverage(x.size(1)).to(x.device)(x)
        """,
}
HELPERS = """
    import torch

    def averaging_weights(T):
        w = torch.ones(T, T).tril()
        return w / w.sum(dim=1, keepdim=True)
    """


@pytest.mark.parametrize("source", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_correct_forms_are_accepted(source: str):
    refusals = read(textwrap.dedent(source) + OTHERS, helpers=HELPERS)
    assert refusals == [], shown(refusals)


# what: (masking.py, the text of the line to be named, other submission files)
REFUSED = {
    "a for loop over range": ("""
        import torch

        def causal_average(x):
            out = torch.empty_like(x)
            for t in range(x.size(1)):
                out[:, t] = x[:, : t + 1].mean(dim=1)
            return out
        """, "for t in range", {}),
    "a while loop": ("""
        import torch

        def causal_average(x):
            t, out = 0, torch.empty_like(x)
            while t < x.size(1):
                t = t + 1
            return out
        """, "while t <", {}),
    "a comprehension over the positions": ("""
        import torch

        def causal_average(x):
            return torch.stack([x[:, : t + 1].mean(dim=1) for t in range(x.size(1))], dim=1)
        """, "return torch.stack", {}),
    "a loop over the shape of a built tensor": ("""
        import torch

        def causal_average(x):
            out = torch.empty_like(x)
            t = 0
            for _ in torch.empty([1] * x.size(1)).shape:
                t += 1
            return out
        """, "for _ in", {}),
    "a loop over the shape of a parameter bound again": ("""
        import torch

        def causal_average(x):
            y = x
            x = x.new_empty([1] * x.size(1))
            for _ in x.shape:
                pass
            return y
        """, "for _ in x.shape", {}),
    "numpy in a loop over a helper's parameter's shape": ("""
        import numpy as np
        import torch

        def _walk(y, data):
            for _ in y.shape:
                data = np.cumsum(data)
            return data

        def causal_average(x):
            return torch.tensor(_walk(x.new_empty([1] * x.size(1)), 0.0))
        """, "data = np.cumsum(data)", {}),
    "work in a loop over a helper's parameter's shape (a tensor of 64 dims: T padded)": ("""
        import torch

        def _walk(positions, x):
            out = x
            for _ in positions.shape:
                out = out + x
            return out

        def causal_average(x):
            return _walk(x.new_empty([1] * 64), x)
        """, "out = out + x", {}),
    "work in a comprehension over a default parameter's shape": ("""
        import torch

        def causal_average(x, positions=torch.empty([1] * 16)):
            return torch.stack([x.mean(dim=1) for _ in positions.shape], dim=1)
        """, "return torch.stack", {}),
    "recursion": ("""
        import torch

        def causal_average(x):
            if x.size(1) == 1:
                return x
            head = causal_average(x[:, :-1])
            return torch.cat([head, x.mean(dim=1, keepdim=True)], dim=1)
        """, "def causal_average", {}),
    "recursion through a nested def": ("""
        import torch

        def causal_average(x):
            def upto(t):
                return x[:, :1] if t == 0 else torch.cat([upto(t - 1), x[:, : t + 1].mean(1, keepdim=True)], 1)
            return upto(x.size(1) - 1)
        """, "def upto", {}),
    "recursion across files": ("""
        import torch
        from .helpers import step

        def causal_average(x):
            return step(x, 0)
        """, "def causal_average", {"helpers": """
        import torch
        from .masking import causal_average

        def step(x, t):
            return causal_average(x)
        """}),
    "a lambda handed to a function": ("""
        import torch

        def causal_average(x):
            last = max(range(x.size(1)), key=lambda t: x[:, : t + 1].mean())
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "last = max(", {}),
    "a lambda bound to a name, handed to a function": ("""
        import torch

        def causal_average(x):
            score = lambda t: x[:, : t + 1].mean()
            last = max(range(x.size(1)), key=score)
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "last = max(", {}),
    "a def handed to a function": ("""
        import torch

        def _row(t):
            return t

        def causal_average(x):
            return torch.tensor(list(map(_row, x.unbind(1))))
        """, "return torch.tensor", {}),
    "a bound method handed as a key": ("""
        import torch

        class _Acc:
            def step(self, t):
                return t

        def causal_average(x):
            acc = _Acc()
            return max(x.unbind(1), key=acc.step)
        """, "return max", {}),
    "a tensor method handed to a function": ("""
        import torch

        def causal_average(x):
            return torch.tensor(x.size(1)).apply_(x.sum)
        """, "return torch.tensor", {}),
    "numpy": ("""
        import numpy as np
        import torch

        def causal_average(x):
            return torch.as_tensor(np.cumsum(x, axis=1))
        """, "return torch.as_tensor(np.cumsum", {}),
    ".tolist()": ("""
        import torch

        def causal_average(x):
            return torch.tensor(x.tolist())
        """, "return torch.tensor(x.tolist())", {}),
    "sum over the positions": ("""
        import torch

        def causal_average(x):
            return sum(x.unbind(1)) + 0 * x
        """, "return sum", {}),
    "exec": ("""
        import torch

        def causal_average(x):
            exec("pass")
            return x
        """, 'exec("pass")', {}),
    "getattr": ("""
        import torch

        def causal_average(x):
            return getattr(torch, "cumsum")(x, 1)
        """, "return getattr(", {}),
    "a dunder attribute": ("""
        import torch

        def causal_average(x):
            return x.__class__.cumsum(x, 1)
        """, "return x.__class__", {}),
    "torch.vmap": ("""
        import torch

        def causal_average(x):
            return torch.vmap(torch.cumsum)(x, 1)
        """, "return torch.vmap", {}),
    "a dead-code guard": ("""
        import torch

        def causal_average(x):
            if False:
                return x
            return x.cumsum(1)
        """, "if False:", {}),
    "__name__ bound at the top": ("""
        import torch

        __name__ = "__main__"

        def causal_average(x):
            return x.cumsum(1)
        """, "__name__ =", {}),
    "a for loop at the top": ("""
        import torch

        for _ in range(3):
            pass

        def causal_average(x):
            return x.cumsum(1)
        """, "for _ in range(3)", {}),
    "an annotation that runs code": ("""
        import torch

        def causal_average(x):
            return x.cumsum(1)

        def _unused(a: print("runs")):
            pass
        """, "def _unused", {}),
    "a decorator the reader does not know": ("""
        import torch

        @torch.jit.script
        def causal_average(x):
            return x.cumsum(1)
        """, "@torch.jit.script", {}),
    "a name bound twice": ("""
        import torch

        def causal_average(x):
            return x.cumsum(1)

        causal_average = torch.cumsum
        """, "causal_average = torch.cumsum", {}),
    "an operator of a class the function uses": ("""
        import torch

        class _Avg:
            def __rmatmul__(self, x):
                return x

        def causal_average(x):
            return x @ _Avg()
        """, "def __rmatmul__", {}),
    "a metaclass": ("""
        import torch

        class _Meta(type):
            pass

        class _Avg(metaclass=_Meta):
            pass

        def causal_average(x):
            return x
        """, "class _Avg", {}),
    "a star import": ("""
        from torch import *

        def causal_average(x):
            return x.cumsum(1)
        """, "from torch import *", {}),
    "an assignment expression": ("""
        import torch

        def causal_average(x):
            return (y := x.cumsum(1))
        """, "return (y :=", {}),
    "a function stored in a variable and handed on": ("""
        import torch

        def _again(t, me, x):
            return x if t == 0 else me(t - 1, me, x)

        def causal_average(x):
            me = _again
            return me(x.size(1), me, x)
        """, "me = _again", {}),
    "a class handed to itself": ("""
        import torch

        class _Step:
            def __init__(self, again, t):
                self.t = t

        def causal_average(x):
            _Step(_Step, x.size(1))
            return x
        """, "_Step(_Step, x.size(1))", {}),
    "an f-string outside a message": ("""
        import torch

        def causal_average(x):
            text = f"{x}"
            return x
        """, "text = f", {}),
    "% formatting outside a message": ("""
        import torch

        def causal_average(x):
            text = "%s" % x
            return x
        """, "text = ", {}),
    "a helper file's import-time loop": ("""
        import torch
        from . import helpers

        def causal_average(x):
            return x.cumsum(1)
        """, "for _ in range(2)", {"helpers": """
        import torch

        for _ in range(2):
            pass
        """}),
}

# Python calls code without a loop or a call in sight: a builtin walking what it is handed (print formats each
# element, max compares them), torch's modules calling the modules they hold, calling a module (its forward),
# formatting one (its extra_repr), torch calling a module's own methods on every child. Each way to run code once
# per position through them is refused, on its line.
IMPLICIT = {
    "a builtin walking a starred sequence of tensors": ("""
        import torch

        def causal_average(x):
            w = torch.ones(x.size(1), x.size(1)).tril()
            max(x, *x.unbind(1))
            return w / w.sum(1, keepdim=True) @ x
        """, "max(x, *x.unbind(1))", {}),
    "print walking modules repeated T times, each formatted by its extra_repr": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def extra_repr(self):
                return ""

        def causal_average(x):
            print(*[_Step()] * x.size(1))
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "print(*[_Step()]", {}),
    "a list of modules repeated T times through a name": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def forward(self, x):
                return x

        def causal_average(x):
            steps = [_Step()]
            layers = x.size(1) * steps
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "layers = x.size(1) * steps", {}),
    "a module that calls itself": ("""
        import torch
        from torch import nn

        class _Average(nn.Module):
            def forward(self, x, t):
                if t == 0:
                    return x[:, :1]
                return torch.cat([self(x, t - 1), x[:, : t + 1].mean(1, keepdim=True)], dim=1)

        def causal_average(x):
            return _Average()(x, x.size(1) - 1)
        """, "def forward", {}),
    "a module that calls the module it holds, itself": ("""
        import torch
        from torch import nn

        class _Average(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = self

            def forward(self, x, t):
                if t == 0:
                    return x[:, :1]
                return torch.cat([self.inner(x, t - 1), x[:, : t + 1].mean(1, keepdim=True)], dim=1)

        def causal_average(x):
            average = _Average()
            return average(x, x.size(1) - 1)
        """, "def forward", {}),
    "a module whose extra_repr prints itself": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def extra_repr(self):
                print(self)
                return ""

        def causal_average(x):
            print(_Step())
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "def extra_repr", {}),
    "torch's container calling each module it holds": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def forward(self, x):
                return x

        def causal_average(x):
            twice = nn.Sequential(_Step(), _Step())
            return twice(x).cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "twice = nn.Sequential", {}),
    "a Transformer encoder repeating a layer T times": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def forward(self, x, **kwargs):
                return x

        def causal_average(x):
            nn.TransformerEncoder(_Step(), num_layers=x.size(1))(x)
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "nn.TransformerEncoder(_Step()", {}),
    "a method torch calls on every child module": ("""
        import torch
        from torch import nn

        class _Step(nn.Module):
            def train(self, mode=True):
                return self

        def causal_average(x):
            _Step().train()
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "def train", {}),
    "a tensor subclass, whose methods torch calls itself": ("""
        import torch

        class _Rows(torch.Tensor):
            def item(self):
                return 0.0

        def causal_average(x):
            print(_Rows())
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "class _Rows", {}),
    "a solver calling the object it is handed once per iteration": ("""
        import torch
        from torch import nn

        class _Track(nn.Module):
            def forward(self, solver):
                return None

        def causal_average(x):
            a = torch.eye(3 * x.size(1))
            torch.lobpcg(a, 1, tracker=_Track(), niter=x.size(1))
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1).view(1, -1, 1)
        """, "torch.lobpcg", {}),
}
REFUSED.update(IMPLICIT)

IMPLICIT_ACCEPTED = {
    "lambdas bound to names, at the top and inside the function (the contract allows them)": """
        import torch

        create_look_ahead_mask = lambda T: torch.tril(torch.ones(T, T)).unsqueeze(0).unsqueeze(0)
        causal_mask = lambda T: torch.triu(torch.full((1, 1, T, T), float("-inf")), diagonal=1)

        def causal_average(x):
            normalise = lambda w: w / w.sum(dim=-1, keepdim=True)
            T = x.size(1)
            return normalise(torch.ones(T, T, dtype=x.dtype, device=x.device).tril()) @ x
        """,
    "a demo under if __name__ == \"__main__\" (it never runs on import), a try in the function": """
        import torch

        def causal_average(x):
            try:
                T = x.size(1)
            except AttributeError as error:
                raise TypeError(f"x must be a tensor, not {x!r}") from error
            else:
                w = torch.ones(T, T, dtype=x.dtype, device=x.device).tril()
            finally:
                pass
            return w / w.sum(dim=-1, keepdim=True) @ x

        if __name__ == "__main__":
            for T in range(1, 100):
                print(causal_average(torch.randn(1, T, 2)).shape)
        """,
    "causal_average itself a lambda": """
        import torch

        causal_average = lambda x: x.cumsum(1) / torch.arange(1, x.size(1) + 1, device=x.device).view(1, -1, 1)
        """,
    "a module calling the torch modules it holds, an f-string in its assert": """
        import torch
        from torch import nn

        class _Average(nn.Module):
            def __init__(self):
                super().__init__()
                self.soft = nn.Softmax(dim=-1)

            def forward(self, x):
                T = x.size(1)
                assert T > 0, f"an empty sequence: {tuple(x.shape)}"
                blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                scores = torch.zeros(T, T, dtype=x.dtype, device=x.device).masked_fill(blocked, float("-inf"))
                return self.soft(scores) @ x

        def causal_average(x):
            average = _Average()
            return average(x)
        """,
    "a local tensor's shape unpacked, constants repeated": """
        import torch

        def causal_average(x):
            T = x.size(1)
            w = torch.ones(T, T, dtype=x.dtype, device=x.device).tril()
            y = (w / w.sum(-1, keepdim=True)) @ x
            leading = y.shape[:-1]
            return y.reshape(*leading, -1)[(slice(None),) * 2].view(*[1] * (x.dim() - 3), *y.shape)
        """,
}
ACCEPTED.update(IMPLICIT_ACCEPTED)


@pytest.mark.parametrize(("source", "text", "modules"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_forms_name_their_line(source: str, text: str, modules: dict[str, str]):
    refusals = read(source, **modules)
    file = next((f"{name}.py" for name, other in modules.items() if f"\n        {text}" in other), "masking.py")
    line = line_of(modules.get(file.removesuffix(".py"), source), text)
    assert (file, line) in {(r.file, r.line) for r in refusals}, f"{file} line {line} not named in\n{shown(refusals)}"
    assert all(r.hint for r in refusals)


def test_a_local_variable_named_like_a_looping_function_is_that_variable():
    source = """
        import torch

        def _weights(T):
            rows = [torch.ones(T)[: t + 1] for t in range(T)]
            return rows

        def causal_average(x):
            _weights = torch.ones(x.size(1), x.size(1), dtype=x.dtype, device=x.device).tril()
            return _weights / _weights.sum(dim=1, keepdim=True) @ x
        """
    assert read(source) == [], shown(read(source))


def test_the_same_name_read_from_the_module_is_the_looping_function():
    source = """
        import torch

        def _weights(T):
            rows = [torch.ones(T)[: t + 1] for t in range(T)]
            return rows

        def causal_average(x):
            weights = _weights(x.size(1))
            return x
        """
    assert [r.line for r in read(source)] == [line_of(source, "rows = [")], shown(read(source))


def test_a_function_that_calls_itself_is_named_in_the_message():
    source = """
        import torch

        def subsequent_mask(size):
            return subsequent_mask(size - 1) if size > 1 else torch.ones(1, 1)

        def causal_average(x):
            return subsequent_mask(x.size(1)) @ x
        """
    refusals = read(source)
    assert [r.line for r in refusals] == [line_of(source, "def subsequent_mask")], shown(refusals)
    assert "subsequent_mask -> subsequent_mask" in refusals[0].what


def test_a_comprehension_variable_does_not_hide_the_parameter_it_shadows():
    source = """
        import torch

        def causal_average(x):
            ok = all(x > 0 for x in x.shape)
            return x.cumsum(1) / torch.arange(1, x.size(1) + 1, dtype=x.dtype, device=x.device).view(1, -1, 1)
        """
    assert read(source) == [], shown(read(source))


def test_a_missing_or_unparsable_function_is_refused_not_crashed_on():
    assert [str(r) for r in read("def causal_average(x) return x\n")] == [
        "masking.py line 1: the file could not be parsed"]
    assert read("import torch\n")[0].what == "causal_average is not defined by a plain def"


def test_methods_that_call_each_other_through_self_are_recursion():
    source = """
        import torch

        class _Base:
            def run(self, x):
                return self.again(x)

        class _Child(_Base):
            def again(self, x):
                return self.run(x)

        def causal_average(x):
            return _Child().run(x)
        """
    refusals = read(source)
    assert any("runs itself again" in r.what for r in refusals), shown(refusals)


def test_classes_that_call_their_base_with_super_are_not_recursion():
    source = """
        import torch
        from torch import nn

        class _Base(nn.Module):
            def __init__(self):
                super().__init__()

        class _Average(_Base):
            def __init__(self):
                super(_Average, self).__init__()

            def forward(self, x):
                T = x.size(1)
                return torch.ones(T, T, dtype=x.dtype, device=x.device).tril().softmax(dim=-1) @ x

        class _Other(nn.Module):
            def __init__(self):
                super().__init__()

        def causal_average(x):
            return _Average()(x)
        """
    assert read(source) == [], shown(read(source))


def test_a_bound_method_kept_in_a_variable_is_refused():
    source = """
        import torch

        class _Step:
            def sum(self, t, other):
                again = other.sum
                return again(t - 1, other)

        def causal_average(x):
            return _Step().sum(x.size(1), _Step())
        """
    line = line_of(source, "again = other.sum")
    assert line in {r.line for r in read(source)}, shown(read(source))


def test_code_nested_too_deeply_is_refused_not_crashed_on():
    source = "import torch\n\ndef causal_average(x):\n    return x" + " + x" * 20000 + "\n"
    assert [r.what for r in read(source)] in (["code nested too deeply for the reader"],
                                              ["the file could not be parsed"])


def test_a_function_named_super_is_followed_not_taken_for_the_builtin():
    source = """
        import torch

        def super():
            for t in range(3):
                pass

        class _Average:
            def __init__(self):
                super().x

        def causal_average(x):
            _Average()
            return x
        """
    assert line_of(source, "for t in range(3)") in {r.line for r in read(source)}, shown(read(source))


def test_the_counts_see_python_work_per_position_that_dispatches_nothing(tmp_path):
    """The worker's count (`instrument.count_ops`) takes the lines run in the submission's files besides the torch
    operations: a loop whose work is Python's own (rows of a mask as list slices, one torch.tensor at the end)
    dispatches as few operations at any T, and runs a line per position however Python is made to repeat it."""
    folder = tmp_path / "exercises"
    folder.mkdir()
    (folder / "masking.py").write_text(textwrap.dedent("""
        import torch

        def _row(keep, T, t):
            keep[t * T: t * T + t + 1] = [1.0] * (t + 1)
            return t + 1 < T and _row(keep, T, t + 1)

        def causal_average(x):
            T = x.size(1)
            keep = [0.0] * (T * T)
            _row(keep, T, 0)
            w = torch.tensor(keep, dtype=x.dtype).view(T, T)
            return w / w.sum(dim=1, keepdim=True) @ x
        """), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("counted_masking", folder / "masking.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    short, long = (instrument.count_ops(module.causal_average, [torch.randn(1, T, 2)], {},
                                        lines_in=(f"{folder}{os.sep}",)) for T in (8, 300))
    assert short["total"] == long["total"], "the operations are flat: Python's own work dispatches none"
    assert long["lines"] > short["lines"] + 500, f"lines at T=8 and T=300: {short['lines']}, {long['lines']}"
    reference = instrument.count_ops(module.causal_average, [torch.randn(1, 8, 2)], {})
    assert reference["lines"] == 0, "no folder named, no lines counted"
