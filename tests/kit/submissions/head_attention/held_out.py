"""Realistic mistakes in head_attention.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="values_from_the_key_layer",
        why="Computes the values with the key layer (v = self.key(x)), a copy-paste slip.",
        edits=(("v = self.value(x)", "v = self.key(x)"),),
    ),
    EditedVersion(
        name="scale_by_sequence_length",
        why="Divides the scores by the square root of T instead of head_size.",
        edits=(("math.sqrt(k.size(-1))", "math.sqrt(T)"),),
    ),
)
