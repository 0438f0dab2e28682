"""Known mistakes in kv_cache.py, each as edits of solutions/kv_cache.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="positions_not_offset",
        why="Rotates every call's tokens at positions 0..T-1, so each decoding step is at position 0.",
        diagnosis=("each call's tokens are rotated at positions 0..T-1: rotate them at T_past .. T_past + T - 1, "
                   "torch.arange(T_past, T_past + T)."),
        edits=(("positions = torch.arange(T_past, T_past + T, device=x.device)",
                "positions = torch.arange(T, device=x.device)"),),
    ),
    Mistake(
        name="mask_not_offset",
        why="Masks with the (T, T_past + T) lower triangle unshifted, so new tokens cannot see most of the cache.",
        diagnosis=("the causal triangle is not shifted by the cached positions: new token t sees keys "
                   "0 .. T_past + t, .tril(diagonal=T_past)."),
        edits=((".tril(diagonal=T_past)", ".tril()"),),
    ),
    Mistake(
        name="square_causal_mask",
        why="Builds the causal mask as (T, T), which fits the scores only without a cache or for one new token.",
        diagnosis=("the causal mask is (T, T), but the scores are (T, T_past + T): keep key j for new token t "
                   "when j <= T_past + t, torch.ones(T, T_past + T).tril(diagonal=T_past)."),
        edits=(("keep = torch.ones(T, T_past + T, dtype=torch.bool, device=x.device).tril(diagonal=T_past)",
                "keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()"),),
    ),
    Mistake(
        name="keys_cached_before_rope",
        why="Caches the keys before RoPE, then uses the cached ones unrotated at the next call.",
        diagnosis=("the cache holds the keys before RoPE, so the past keys are used unrotated: cache them after "
                   "self.rope, each rotated once at its own position."),
        edits=(
            ("        q, k = self.rope(q, k, positions)  # rotated once, at their own positions\n",
             "        k_raw = k\n        q, k = self.rope(q, k, positions)\n"),
            ("            k = torch.cat((cache[0], k), dim=2)  # (B, nh, T_past + T, hd): keys are cached after RoPE\n",
             "            k = torch.cat((cache[0], k), dim=2)\n"
             "            k_raw = torch.cat((cache[0], k_raw), dim=2)\n"),
            ("return self.resid_dropout(self.wo(out)), (k, v)", "return self.resid_dropout(self.wo(out)), (k_raw, v)"),
        ),
    ),
    Mistake(
        name="cache_on_the_heads_dim",
        why="Appends the new keys and values along dim 1, the heads, instead of dim 2, the positions.",
        diagnosis=("the cache is appended along dim 1, the heads: append along dim 2, the positions, of "
                   "(B, n_heads, T, head_dim)."),
        edits=(
            ("k = torch.cat((cache[0], k), dim=2)", "k = torch.cat((cache[0], k), dim=1)"),
            ("v = torch.cat((cache[1], v), dim=2)", "v = torch.cat((cache[1], v), dim=1)"),
        ),
    ),
    Mistake(
        name="no_length_check",
        why="Never checks T_past + T against max_seq_len, so past it the RoPE tables run out with an IndexError.",
        diagnosis=("past max_seq_len the call fails inside RoPE, not with a ValueError: raise ValueError when "
                   "T_past + T > max_seq_len, before anything else."),
        edits=(("        if T_past + T > self.max_seq_len:\n"
                "            raise ValueError(f\"{T_past} cached and {T} new positions exceed max_seq_len "
                "{self.max_seq_len}\")\n", ""),),
    ),
)
