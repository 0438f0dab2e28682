"""Realistic mistakes in sliding_window.py kept out of the catalogue: they lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="window_one_short",
        why="Keeps keys with i - j < window - 1: one position fewer than the window.",
        edits=(("(i - j < window)", "(i - j < window - 1)"),),
    ),
    EditedVersion(
        name="no_scaling",
        why="Forgets to divide the scores by sqrt(d).",
        edits=((" / math.sqrt(q.size(-1))", ""),),
    ),
)
