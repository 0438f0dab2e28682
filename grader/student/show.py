"""`show` runs the student's attention, sandboxed, on the course notes' worked example and draws its weights.

The example is note 3's: five tokens with four features each, used as their own queries, keys
and values (self-attention without projections), so the weights are softmax(X Xᵀ / √4). The
causal version sends the same scores through `masking.weight_mask_and_normalization`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.color import Color
from rich.console import Console
from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

from grader.grade.reports import atomic_path
from grader.host.session import GradingSession
from grader.lang import N_, tr
from grader.text import clean
from grader.view.render import marks_for

# Note 3's embeddings; the weights it prints for them are softmax(X Xᵀ / 2), row by row.
EXAMPLE: tuple[tuple[float, ...], ...] = (
    (1.0, 0.0, 1.0, 0.0),
    (0.0, 1.0, 0.0, 1.0),
    (1.0, 1.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 1.0),
    (1.0, 0.5, 0.5, 0.0),
)
TOKENS: tuple[str, ...] = tuple(f"Token {i}" for i in range(1, len(EXAMPLE) + 1))
TOLERANCE = 1e-4
# Matplotlib's "Blues" at its two ends: pale for weight 0, dark for the largest weight.
PALE, DARK = (247, 251, 255), (8, 48, 107)


@dataclass(frozen=True)
class Heatmap:
    """One grid of attention weights (queries as rows, keys as columns), or why there is none. The title and the
    verdict are catalog messages, translated where they are shown; the problem is in the reader's language."""

    title: str
    function: str
    expected: torch.Tensor
    verdict: str
    weights: torch.Tensor | None = None
    problem: str | None = None

    @property
    def largest_error(self) -> tuple[float, int, int] | None:
        """(|difference|, row, column) where the weights differ most from the formula, or None."""
        if self.weights is None:
            return None
        difference = (self.weights - self.expected).abs().nan_to_num(nan=math.inf)
        flat = int(difference.argmax())
        row, column = divmod(flat, difference.size(1))
        return float(difference[row, column]), row, column


def example() -> torch.Tensor:
    return torch.tensor(EXAMPLE, dtype=torch.float32)


def scores(x: torch.Tensor) -> torch.Tensor:
    return x @ x.transpose(-2, -1) / math.sqrt(x.size(-1))


def expected_weights() -> tuple[torch.Tensor, torch.Tensor]:
    """The weights the formulas give: plain self-attention, and causal self-attention."""
    s = scores(example())
    causal = s.masked_fill(torch.ones_like(s, dtype=torch.bool).tril().logical_not(), float("-inf"))
    return s.softmax(dim=-1), causal.softmax(dim=-1)


def collect(submission: Path) -> tuple[Heatmap, Heatmap]:
    """Run the two examples through the submission's worker; failures become one-line problems."""
    from grader.host.failures import SubmissionFailure

    plain, causal = expected_weights()
    x = example()
    from grader.host import tiers

    session = GradingSession.open(submission, device="cpu", protect=tiers.exposure("public"))
    try:
        impl = session.impl()

        def run(title: str, function: str, exercise: str, expected: torch.Tensor, verdict: str,
                call: Callable[[], Any]) -> Heatmap:
            try:
                weights = call()
            except SubmissionFailure as error:
                where = session.submission.shown(f"{exercise}.py")
                return Heatmap(title, function, expected, verdict, problem=_explain(function, exercise, error, where))
            if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != tuple(expected.shape):
                got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
                return Heatmap(title, function, expected, verdict, problem=tr(
                    "{function} gave weights of shape {shape} for 5 tokens, expected (5, 5): run `grader check "
                    "{exercise}` to see why", function=function, shape=str(got), exercise=exercise))
            return Heatmap(title, function, expected, verdict, weights=weights.detach().to("cpu", torch.float32))

        first = run(N_("Self-attention on note 3's five tokens"), "attention(x, x, x)", "attention", plain,
                    N_("These are the weights the course notes print for this example."),
                    lambda: _weights_of_pair(impl.attention.attention(x, x, x)))
        second = run(N_("The same scores, causal"), "weight_mask_and_normalization(scores)", "masking", causal,
                     N_("Each token attends to itself and the tokens before it only, as it should."),
                     lambda: impl.masking.weight_mask_and_normalization(scores(x)))
    finally:
        session.close()
    return first, second


def _weights_of_pair(value: Any) -> Any:
    if isinstance(value, tuple | list) and len(value) == 2:
        return value[1]
    return value


def _explain(function: str, exercise: str, error: Exception, where: str) -> str:
    from grader.host.failures import NotImplementedYet

    if isinstance(error, NotImplementedYet):
        return tr("{function} is not implemented yet: fill in {file}, then run `grader show attention` again",
                  function=function, file=where)
    detail = (str(error).splitlines() or [type(error).__name__])[0]
    return tr("{function} failed: {detail} (`grader check {exercise}` says more)", function=function, detail=detail,
              exercise=exercise)


def _colour(weight: float, top: float) -> tuple[int, int, int]:
    t = 0.0 if not math.isfinite(weight) or top <= 0 else min(max(weight / top, 0.0), 1.0)
    return tuple(round(p + (d - p) * t) for p, d in zip(PALE, DARK, strict=True))  # type: ignore[return-value]


def _cell(weight: float, top: float) -> Text:
    red, green, blue = _colour(weight, top)
    dark = math.isfinite(weight) and top > 0 and weight / top > 0.55
    style = Style(bgcolor=Color.from_rgb(red, green, blue), color="white" if dark else "black")
    return Text(f" {weight:.4f} ", style=style)


def render(heatmap: Heatmap, console: Console) -> None:
    if heatmap.weights is None:
        # The problem quotes the submission's own error message.
        console.print(f"[yellow]{marks_for(console).failed}[/] {escape(clean(heatmap.problem or '', newlines=False))}")
        return
    weights = heatmap.weights
    top = float(weights.nan_to_num(nan=0.0).max()) or 1.0
    title = tr("{title}: {function}", title="[bold]" + tr(heatmap.title) + "[/]", function=heatmap.function)
    caption = tr("rows: queries · columns: keys · darker = more weight")
    table = Table(title=title, title_justify="left", box=None, caption=caption, caption_justify="left",
                  padding=(0, 0), collapse_padding=True)
    table.add_column(tr("query ↓  key →"), style="bold", no_wrap=True)
    for token in TOKENS:
        table.add_column(token, justify="center", no_wrap=True)
    for token, vector, row in zip(TOKENS, EXAMPLE, weights.tolist(), strict=True):
        label = f"{token} [{', '.join(f'{v:g}' for v in vector)}] "
        table.add_row(label, *(_cell(w, top) for w in row))
    console.print(table)
    error = heatmap.largest_error
    if error is not None and not error[0] <= TOLERANCE:
        difference, row, column = error
        failed = marks_for(console).failed
        console.print(f"[red]{failed}[/] " + tr(
            "These weights differ from the formula's by {difference} at {query} → {key} (expected {expected}): run "
            "`grader check` for what is wrong", difference=f"{difference:.4f}", query=TOKENS[row], key=TOKENS[column],
            expected=f"{float(heatmap.expected[row, column]):.4f}"))
    else:
        console.print(f"[green]{marks_for(console).passed}[/] {tr(heatmap.verdict)}")
    console.print()


def write_png(heatmaps: tuple[Heatmap, ...], path: Path) -> bool:
    """Draw the heat-maps that have weights into one PNG, atomically; False when none has weights. Its text is in the
    reader's language where a font here has the characters (`charts.drawable`), else in English."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from grader.batch.charts import drawable, drawing

    drawn = [heatmap for heatmap in heatmaps if heatmap.weights is not None]
    if not drawn:
        return False
    with drawing():  # the figure's fonts are chosen as its text is made
        figure, axes = pyplot.subplots(1, len(drawn), figsize=(5.2 * len(drawn), 4.6), squeeze=False)
        for axis, heatmap in zip(axes[0], drawn, strict=True):
            weights = heatmap.weights.numpy()  # type: ignore[union-attr]
            image = axis.imshow(weights, cmap="Blues", vmin=0.0)
            top = float(weights.max()) or 1.0
            for row in range(weights.shape[0]):
                for column in range(weights.shape[1]):
                    value = float(weights[row, column])
                    axis.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=9,
                              color="white" if value / top > 0.55 else "black")
            axis.set_xticks(range(len(TOKENS)), TOKENS, rotation=30)
            axis.set_yticks(range(len(TOKENS)), TOKENS)
            axis.set_xlabel(drawable(N_("key token")))
            axis.set_ylabel(drawable(N_("query token")))
            axis.set_title(f"{drawable(heatmap.title)}\n{heatmap.function}", fontsize=9)
            figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
        figure.tight_layout()
        try:
            with atomic_path(path, ".png") as temporary:
                figure.savefig(temporary, format="png", dpi=120)
        finally:
            pyplot.close(figure)
    return True
