"""Realistic mistakes in attention.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="scale_by_query_count",
        why="Divides the scores by the square root of the number of queries instead of d_k.",
        edits=(("d_k = query.size(-1)", "d_k = query.size(-2)"),),
    ),
    EditedVersion(
        name="blocked_scores_set_to_zero",
        why="Sets the scores of blocked keys to 0 instead of -inf, so they keep some weight.",
        edits=(('masked_fill(mask == 0, float("-inf"))', "masked_fill(mask == 0, 0.0)"),),
    ),
    EditedVersion(
        name="scaled_after_the_softmax",
        why="Divides the weights by sqrt(d_k) after the softmax instead of the scores before it (a student's second "
            "try in a trial): every row sums to 1/sqrt(d_k), and the softmax's dim is right.",
        edits=(("    p_attn = scores.softmax(dim=-1)  # (..., L_q, L_k), each row sums to 1\n",
                "    p_attn = (query @ key.transpose(-2, -1)).softmax(dim=-1) / math.sqrt(d_k)\n"),),
    ),
    EditedVersion(
        name="dropout_on_the_scores",
        why="Applies dropout to the scores before the softmax instead of to the weights after it.",
        edits=(
            ("    p_attn = scores.softmax(dim=-1)  # (..., L_q, L_k), each row sums to 1\n", ""),
            ("        p_attn = dropout(p_attn)\n", "        scores = dropout(scores)\n"
                                                 "    p_attn = scores.softmax(dim=-1)\n"),
        ),
    ),
)
