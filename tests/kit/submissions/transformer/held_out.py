"""Realistic mistakes in transformer.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="only_the_source_embeddings_scaled",
        why="Scales the source embeddings by sqrt(d_model) but not the target's.",
        edits=(("y = self.tgt_embed(tgt) * math.sqrt(self.d_model)", "y = self.tgt_embed(tgt)"),),
    ),
    EditedVersion(
        name="target_looked_up_in_the_source_table",
        why="Looks the target tokens up in src_embed, a copy-paste slip.",
        edits=(("y = self.tgt_embed(tgt) * math.sqrt(self.d_model)",
                "y = self.src_embed(tgt) * math.sqrt(self.d_model)"),),
    ),
    EditedVersion(
        name="greedy_decodes_only_the_last_token",
        why="Each greedy step decodes only the last token of ys, so it always sits at position 0.",
        edits=(("out = model.decode(memory, ys)", "out = model.decode(memory, ys[:, -1:])"),),
    ),
)
