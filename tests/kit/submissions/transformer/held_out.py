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
    EditedVersion(
        name="embeddings_scaled_after_the_positions",
        why="Multiplies by sqrt(d_model) after pos has added the positions, on both sides (a LayerNorm hides it).",
        edits=(
            ("x = self.src_embed(src) * math.sqrt(self.d_model)", "x = self.src_embed(src)"),
            ("self.encoder(self.pos(x), src_mask)", "self.encoder(self.pos(x) * math.sqrt(self.d_model), src_mask)"),
            ("y = self.tgt_embed(tgt) * math.sqrt(self.d_model)", "y = self.tgt_embed(tgt)"),
            ("self.decoder(self.pos(y), memory", "self.decoder(self.pos(y) * math.sqrt(self.d_model), memory"),
        ),
    ),
    EditedVersion(
        name="padding_idx_on_the_embeddings",
        why="Builds both embeddings with padding_idx=0, so token 0's row never gets a gradient.",
        edits=(
            ("nn.Embedding(src_vocab, d_model)", "nn.Embedding(src_vocab, d_model, padding_idx=0)"),
            ("nn.Embedding(tgt_vocab, d_model)", "nn.Embedding(tgt_vocab, d_model, padding_idx=0)"),
        ),
    ),
)
