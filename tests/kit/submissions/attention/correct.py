"""Correct variants of attention.py that are one idea away from solutions/attention.py."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="minus_1e9",
        why="Scaled dot-product attention that blocks keys with -1e9 instead of -inf (annotated-transformer style).",
        edits=(('masked_fill(mask == 0, float("-inf"))', "masked_fill(mask == 0, -1e9)"),),
    ),
)
