"""Correct variants of tiny_gpt.py that are one idea away from solutions/tiny_gpt.py: the cache's layout is free, and the
head may share its weight with tok_embed."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="tied_head",
        why="A TinyGPT whose head shares its weight with tok_embed, initialised as nanoGPT's: N(0, 0.02).",
        edits=(("        self.head = nn.Linear(dim, vocab, bias=False)\n",
                "        self.head = nn.Linear(dim, vocab, bias=False)\n"
                "        self.head.weight = self.tok_embed.weight  # tied: one (vocab, dim) matrix\n"
                "        for p in self.parameters():\n"
                "            if p.dim() == 2:\n"
                "                nn.init.normal_(p, std=0.02)\n"),),
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
