"""Realistic mistakes in encoder.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="attention_reads_the_unnormalised_input",
        why="Self-attention reads x instead of the normalised y its residual connection passes in.",
        edits=(("lambda y: self.self_attn(y, y, y, mask)", "lambda y: self.self_attn(x, x, x, mask)"),),
    ),
    EditedVersion(
        name="mask_only_in_the_first_layer",
        why="Passes the padding mask to the first layer only.",
        edits=(("        for layer in self.layers:\n            x = layer(x, mask)",
                "        for i, layer in enumerate(self.layers):\n"
                "            x = layer(x, mask if i == 0 else None)"),),
    ),
)
