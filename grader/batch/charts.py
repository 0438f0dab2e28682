"""`charts` draws the class report's charts with matplotlib, as inline SVG (see `class_report`).

Importing it raises ImportError where matplotlib is not installed; the report then says how to get it.
Figures are made with `matplotlib.figure.Figure`, not pyplot: no global state, no GUI backend, and a
quicker import (as matplotlib's own guide to web servers does). The SVG is the same for the same
numbers: no date, and ids from a fixed salt.
"""

from __future__ import annotations

import io

import matplotlib
from matplotlib.figure import Figure

from grader.batch.summary import ClassSummary
from grader.curriculum import BY_ID

SIZE = (5.0, 3.0)  # inches: two side by side on a page 72em wide
COLOUR = "#3b6ea8"


def histogram(summary: ClassSummary) -> str:
    """The score distribution over the graded submissions: ten bars of 10 percent each."""
    figure = Figure(figsize=SIZE)
    axes = figure.subplots()
    labels = [f"{row.from_percent}–{row.to_percent}" for row in summary.histogram]
    axes.bar(labels, [row.count for row in summary.histogram], color=COLOUR)
    axes.set_title(f"Scores of the {summary.scored} graded submissions (percent)")
    axes.set_ylabel("submissions")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.tick_params(axis="x", labelsize=8)
    return _svg(figure)


def means(summary: ClassSummary) -> str:
    """Each exercise's mean as a share of its points, in curriculum order."""
    figure = Figure(figsize=SIZE)
    axes = figure.subplots()
    names = list(summary.exercises)
    shares = [100 * (mean or 0.0) / float(BY_ID[x].points) for x, mean in summary.exercises.items()]
    axes.barh(names[::-1], shares[::-1], color=COLOUR)
    axes.set_xlim(0, 100)
    axes.set_title("Mean per exercise (percent of its points)")
    axes.tick_params(axis="y", labelsize=8)
    return _svg(figure)


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "attention-kit"}):
        figure.tight_layout()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML declaration or DOCTYPE inside the page
