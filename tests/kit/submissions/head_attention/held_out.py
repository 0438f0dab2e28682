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
    EditedVersion(
        name="softmax_in_float32_not_cast_back",
        why="Takes the softmax in float32, as the course notes do, but never casts the weights back to x's dtype.",
        edits=(("wei = wei.softmax(dim=-1)", "wei = wei.float().softmax(dim=-1)"),),
    ),
)
