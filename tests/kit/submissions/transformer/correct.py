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
    EditedVersion(
        name="nanogpt_init",
        why="nanoGPT's and llama2.c's initialisation: every weight N(0, 0.02), biases zero, and the projections "
            "back into the residual stream N(0, 0.02 / sqrt(2 n_layers)); times sqrt(d_model) the embeddings are "
            "then small beside the positions, and the model learns more slowly.",
        edits=(
            ('        for embed in (self.src_embed, self.tgt_embed):\n            # std 1/sqrt(d_model): times sqrt(d_model) the embeddings have std 1, the scale of the encoding.\n            nn.init.normal_(embed.weight, std=d_model**-0.5)\n', ""),
            (
                '        self.generator = nn.Linear(d_model, tgt_vocab)\n',
                '        self.generator = nn.Linear(d_model, tgt_vocab)\n'
                "        self.apply(self._init_weights)\n"
                "        for name, p in self.named_parameters():\n"
                "            if name.endswith((\"wo.weight\", \"w2.weight\")):  # nanoGPT's c_proj\n"
                "                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))\n"
                "\n"
                "    def _init_weights(self, module):\n"
                "        if isinstance(module, nn.Linear):\n"
                "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n"
                "            if module.bias is not None:\n"
                "                nn.init.zeros_(module.bias)\n"
                "        elif isinstance(module, nn.Embedding):\n"
                "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n",
            ),
        ),
    ),
    EditedVersion(
        name="hugging_face_init",
        why="Hugging Face's _init_weights with initializer_range 0.02: Linear and Embedding weights N(0, 0.02), "
            "biases zero, LayerNorm weight 1 and bias 0.",
        edits=(
            ('        for embed in (self.src_embed, self.tgt_embed):\n            # std 1/sqrt(d_model): times sqrt(d_model) the embeddings have std 1, the scale of the encoding.\n            nn.init.normal_(embed.weight, std=d_model**-0.5)\n', ""),
            (
                '        self.generator = nn.Linear(d_model, tgt_vocab)\n',
                '        self.generator = nn.Linear(d_model, tgt_vocab)\n'
                "        for module in self.modules():\n"
                "            if isinstance(module, (nn.Linear, nn.Embedding)):\n"
                "                module.weight.data.normal_(mean=0.0, std=0.02)\n"
                "            if isinstance(module, nn.Linear) and module.bias is not None:\n"
                "                module.bias.data.zero_()\n"
                "            elif isinstance(module, nn.LayerNorm):\n"
                "                module.weight.data.fill_(1.0)\n"
                "                module.bias.data.zero_()\n",
            ),
        ),
    ),
)
