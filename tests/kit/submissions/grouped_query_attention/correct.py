"""Correct variants of grouped_query_attention.py that are one idea away from solutions/grouped_query_attention.py."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="minus_1e9",
        why="Grouped-query attention that blocks keys with -1e9 instead of -inf (annotated-transformer style).",
        edits=(
            ('scores = scores.masked_fill(~causal, float("-inf"))', "scores = scores.masked_fill(~causal, -1e9)"),
            ('scores = scores.masked_fill(mask == 0, float("-inf"))', "scores = scores.masked_fill(mask == 0, -1e9)"),
        ),
    ),
)
