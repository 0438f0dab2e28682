"""Realistic mistakes in grouped_query_attention.py kept out of the catalogue: they lose points, get no name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="scale_by_dim",
        why="Divides the scores by sqrt(dim), the model's width, instead of sqrt(head_dim).",
        edits=(("/ math.sqrt(self.head_dim)", "/ math.sqrt(dim)"),),
    ),
    EditedVersion(
        name="values_tiled_keys_interleaved",
        why="Repeats the key heads with repeat_interleave but tiles the value heads with .repeat.",
        edits=(("xv = xv.repeat_interleave(self.n_rep, dim=1)", "xv = xv.repeat(1, self.n_rep, 1, 1)"),),
    ),
)
