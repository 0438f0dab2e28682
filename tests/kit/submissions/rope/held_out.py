"""Realistic mistakes in rope.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="cos_and_sin_swapped",
        why="rope_tables returns (sin, cos) in that order, so every pair is rotated by the wrong angle.",
        edits=(("return angles.cos(), angles.sin()", "return angles.sin(), angles.cos()"),),
    ),
    EditedVersion(
        name="positions_start_at_one",
        why="Numbers the tables' positions 1..max_seq_len, so position 0 is already rotated.",
        edits=(("torch.arange(max_seq_len, dtype=torch.float32)",
                "torch.arange(1, max_seq_len + 1, dtype=torch.float32)"),),
    ),
)
