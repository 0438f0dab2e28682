"""Correct variants of sliding_window.py that are one idea away from solutions/sliding_window.py."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="nan_to_num_after_softmax",
        why="Lets the softmax of a fully blocked row be NaN and replaces it with nan_to_num: the output is 0, and the "
            "gradients are finite and 0 there too (masked_fill's backward zeroes the NaN of softmax's).",
        edits=(
            ("    scores = scores.masked_fill(empty, 0.0)\n", ""),
            ("p_attn = scores.softmax(dim=-1).masked_fill(empty, 0.0)",
             "p_attn = scores.softmax(dim=-1).nan_to_num(0.0)"),
        ),
    ),
)
