"""`charts` draws the class report's charts with matplotlib, as inline SVG (see `class_report`).

Importing it raises ImportError where matplotlib is not installed; the report then says how to get it.
Figures are made with `matplotlib.figure.Figure`, not pyplot: no global state, no GUI backend, and a
quicker import (as matplotlib's own guide to web servers does). The SVG is the same for the same
numbers: no date, and ids from a fixed salt.

Their text is in the reader's language where a font installed here has its characters (`drawable`); matplotlib's
own fonts have no Chinese ones, so a chart is drawn in English rather than in empty boxes where none is found.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Iterator

import matplotlib
from matplotlib.figure import Figure

from grader import lang
from grader.batch.summary import ClassSummary
from grader.curriculum import BY_ID
from grader.lang import N_, tr

SIZE = (5.0, 3.0)  # inches: two side by side on a page 72em wide
COLOUR = "#3b6ea8"
# Fonts with the Chinese characters, the first installed one drawing them (Linux, Windows, macOS; Noto and Source Han
# are the same design under two names). Latin letters and digits stay in matplotlib's own font.
CHINESE_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Micro Hei",
                 "WenQuanYi Zen Hei", "Microsoft YaHei", "SimHei", "DengXian", "PingFang SC", "Hiragino Sans GB",
                 "Heiti SC", "STHeiti", "Arial Unicode MS", "Droid Sans Fallback")


def histogram(summary: ClassSummary) -> str:
    """The score distribution over the graded submissions: ten bars of 10 percent each."""
    with drawing():
        figure = Figure(figsize=SIZE)
        axes = figure.subplots()
        labels = [f"{row.from_percent}–{row.to_percent}" for row in summary.histogram]
        axes.bar(labels, [row.count for row in summary.histogram], color=COLOUR)
        axes.set_title(drawable(N_("Scores of the {count} graded submissions (percent)"), count=summary.scored))
        axes.set_ylabel(drawable(N_("submissions")))
        axes.yaxis.get_major_locator().set_params(integer=True)
        axes.tick_params(axis="x", labelsize=8)
        return _svg(figure)


def means(summary: ClassSummary) -> str:
    """Each exercise's mean as a share of its points, in curriculum order."""
    with drawing():
        figure = Figure(figsize=SIZE)
        axes = figure.subplots()
        names = list(summary.exercises)
        shares = [100 * (mean or 0.0) / float(BY_ID[x].points) for x, mean in summary.exercises.items()]
        axes.barh(names[::-1], shares[::-1], color=COLOUR)
        axes.set_xlim(0, 100)
        axes.set_title(drawable(N_("Mean per exercise (percent of its points)")))
        axes.tick_params(axis="y", labelsize=8)
        return _svg(figure)


@functools.cache
def chinese_font() -> str | None:
    """The name of an installed font that has the Chinese characters (`CHINESE_FONTS`), or None."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CHINESE_FONTS if name in installed), None)


def _chinese() -> bool:
    return lang.current() == "zh"


def drawable(message: str, **fields: object) -> str:
    """A catalog message for a figure: in the reader's language where a font here can draw it (`drawing`), else
    in English, as written."""
    if _chinese() and chinese_font() is None:
        return message.format(**fields) if fields else message
    return tr(message, **fields)


@contextlib.contextmanager
def drawing() -> Iterator[None]:
    """Text made in this block is drawn in matplotlib's own font, and in `chinese_font` for the characters that one
    lacks, when the reader reads Chinese; as matplotlib has it otherwise (a font is chosen as its text is made)."""
    font = chinese_font() if _chinese() else None
    with matplotlib.rc_context({"font.family": [*matplotlib.rcParams["font.family"], font]} if font else {}):
        yield


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "attention-kit"}):
        figure.tight_layout()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML declaration or DOCTYPE inside the page
