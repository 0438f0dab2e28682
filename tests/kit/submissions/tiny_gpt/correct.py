"""Correct variants of tiny_gpt.py that are one idea away from solutions/tiny_gpt.py: the cache's layout is
free, the head may share its weight with tok_embed, and the initialisation is free (nanoGPT's N(0, 0.02))."""

from grader.judge.variants import EditedVersion

# nanoGPT's _init_weights, applied at the end of TinyGPT.__init__.
NANOGPT_INIT = (
    "        self.apply(self._init_weights)\n"
    "        for name, p in self.named_parameters():  # nanoGPT's c_proj: N(0, 0.02 / sqrt(2 n_layers))\n"
    "            if name.endswith((\"wo.weight\", \"w2.weight\")):\n"
    "                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layers))\n"
    "\n"
    "    def _init_weights(self, module: nn.Module) -> None:\n"
    "        if isinstance(module, nn.Linear):\n"
    "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n"
    "            if module.bias is not None:\n"
    "                nn.init.zeros_(module.bias)\n"
    "        elif isinstance(module, nn.Embedding):\n"
    "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n"
)
VARIANTS = (
    EditedVersion(
        name="nanogpt_init",
        why="A TinyGPT initialised as nanoGPT's: N(0, 0.02) Linear and Embedding weights, zero biases, and the "
            "residual projections' N(0, 0.02 / sqrt(2 n_layers)).",
        edits=(("        self.head = nn.Linear(dim, vocab, bias=False)\n",
                "        self.head = nn.Linear(dim, vocab, bias=False)\n" + NANOGPT_INIT),),
    ),
    EditedVersion(
        name="nanogpt_tied_head",
        why="nanoGPT's head, its weight shared with tok_embed (lm_head.weight is wte.weight), and nanoGPT's "
            "initialisation.",
        edits=(("        self.head = nn.Linear(dim, vocab, bias=False)\n",
                "        self.head = nn.Linear(dim, vocab, bias=False)\n"
                "        self.head.weight = self.tok_embed.weight  # tied: one (vocab, dim) matrix\n" + NANOGPT_INIT),),
    ),
    EditedVersion(
        name="dict_cache",
        why="A TinyGPT whose cache is a dict {layer index: (k, v)}.",
        edits=(("new_cache = []", "new_cache = {}"), ("new_cache.append(layer_cache)", "new_cache[i] = layer_cache")),
    ),
    EditedVersion(
        name="stacked_cache",
        why="A TinyGPT whose cache is one tensor (n_layers, 2, B, n_kv_heads, T_seen, head_dim).",
        edits=(("return self.head(self.norm(x)), new_cache",
                "return self.head(self.norm(x)), torch.stack([torch.stack(kv) for kv in new_cache])"),),
    ),
)
