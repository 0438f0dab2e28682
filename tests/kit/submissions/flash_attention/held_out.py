"""Realistic mistakes in flash_attention.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="scaled_by_the_number_of_keys",
        why="Divides the scores by the square root of the number of keys instead of the width d.",
        edits=(("scale = 1.0 / math.sqrt(q.size(-1))", "scale = 1.0 / math.sqrt(k.size(-2))"),),
    ),
    EditedVersion(
        name="causal_blocks_the_diagonal",
        why="Blocks key j when j >= i, so a query no longer sees itself (the first one sees nothing and gets NaN).",
        edits=(("cols[None, :] > rows[:, None]", "cols[None, :] >= rows[:, None]"),),
    ),
    EditedVersion(
        name="everything_in_float32",
        why="Casts the inputs to float32 first, so float64 inputs come back as float32.",
        edits=(("    scale = 1.0 / math.sqrt(q.size(-1))\n",
                "    q, k, v = q.float(), k.float(), v.float()\n    scale = 1.0 / math.sqrt(q.size(-1))\n"),),
    ),
)
