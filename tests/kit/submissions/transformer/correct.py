"""Correct variants of transformer.py that are one idea away from solutions/transformer.py."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="xavier_everywhere",
        why="Xavier-uniform init for every weight matrix, as the annotated Transformer's make_model does.",
        edits=(
            (
                "        for embed in (self.src_embed, self.tgt_embed):\n"
                "            # std 1/sqrt(d_model): times sqrt(d_model) the embeddings have std 1, the scale of the encoding.\n"
                "            nn.init.normal_(embed.weight, std=d_model**-0.5)\n",
                "",
            ),
            (
                "        self.generator = nn.Linear(d_model, tgt_vocab)\n",
                "        self.generator = nn.Linear(d_model, tgt_vocab)\n"
                "        for p in self.parameters():\n"
                "            if p.dim() > 1:\n"
                "                nn.init.xavier_uniform_(p)\n",
            ),
        ),
    ),
)
