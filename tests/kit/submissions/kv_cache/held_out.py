"""Realistic mistakes in kv_cache.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="scaled_by_sqrt_dim",
        why="Divides the scores by sqrt(dim), the model's width, instead of sqrt(head_dim).",
        edits=(("q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)", "q @ k.transpose(-2, -1) / math.sqrt(dim)"),),
    ),
    EditedVersion(
        name="values_rotated_too",
        why="Rotates the values with RoPE as well as the keys.",
        edits=(("        q, k = self.rope(q, k, positions)  # rotated once, at their own positions\n",
                "        q, k = self.rope(q, k, positions)\n        v, _ = self.rope(v, v, positions)\n"),),
    ),
)
