"""Known mistakes in grouped_query_attention.py, each as edits of solutions/grouped_query_attention.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="kv_heads_tiled",
        why="Repeats the key/value heads with .repeat, which tiles them (kv0, kv1, kv0, kv1), so query head h reads "
            "kv head h % n_kv_heads instead of h // n_rep.",
        diagnosis=("the key/value heads are tiled with .repeat, so query head h reads kv head h % n_kv_heads: use "
                   "repeat_interleave(n_rep, dim=1), as llama's repeat_kv does."),
        edits=(
            ("xk = xk.repeat_interleave(self.n_rep, dim=1)", "xk = xk.repeat(1, self.n_rep, 1, 1)"),
            ("xv = xv.repeat_interleave(self.n_rep, dim=1)", "xv = xv.repeat(1, self.n_rep, 1, 1)"),
        ),
    ),
    Mistake(
        name="full_width_key_value_projections",
        why="Sizes wk and wv dim x dim and gives keys and values n_heads heads: multi-head attention, with no saving.",
        diagnosis=("wk and wv project to dim features, n_heads heads, so nothing is shared: nn.Linear(dim, "
                   "n_kv_heads * head_dim, bias=False)."),
        edits=(
            ("self.wk = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)",
             "self.wk = nn.Linear(args.dim, args.dim, bias=False)"),
            ("self.wv = nn.Linear(args.dim, n_kv_heads * self.head_dim, bias=False)",
             "self.wv = nn.Linear(args.dim, args.dim, bias=False)"),
            ("self.wk(x).view(B, T, self.n_kv_heads,", "self.wk(x).view(B, T, self.n_heads,"),
            ("self.wv(x).view(B, T, self.n_kv_heads,", "self.wv(x).view(B, T, self.n_heads,"),
            ("        xk = xk.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T, hd)\n", ""),
            ("        xv = xv.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T, hd)\n", ""),
        ),
    ),
    Mistake(
        name="no_group_divisibility_check",
        why="Never checks n_heads % n_kv_heads, so 4 query heads over 3 key/value heads builds a module that fails "
            "later.",
        diagnosis=("n_heads % n_kv_heads != 0 is accepted: raise ValueError when the query heads cannot be split "
                   "into equal groups."),
        edits=(
            (
                "        if args.n_heads % n_kv_heads != 0:\n"
                '            raise ValueError(f"n_heads {args.n_heads} is not divisible by n_kv_heads {n_kv_heads}")\n',
                "",
            ),
        ),
    ),
    Mistake(
        name="not_causal",
        why="Attends over every position: no causal mask, so each token sees the future.",
        diagnosis="every query sees the future: block the keys j > i with -inf before the softmax.",
        edits=(('        scores = scores.masked_fill(~causal, float("-inf"))\n', ""),),
    ),
    Mistake(
        name="cache_bytes_without_values",
        why="Counts the keys of the KV cache and forgets its values: half the bytes.",
        diagnosis="kv_cache_bytes counts one tensor per layer: the cache holds keys and values, so multiply by 2.",
        edits=(("return 2 * n_layers * batch", "return n_layers * batch"),),
    ),
    Mistake(
        name="cache_bytes_of_one_layer",
        why="Counts the KV cache of one layer, forgetting that every layer keeps its own.",
        diagnosis=("kv_cache_bytes counts one layer: every layer keeps its own keys and values, so multiply by "
                   "n_layers."),
        edits=(("return 2 * n_layers * batch", "return 2 * batch"),),
    ),
)
