"""Known mistakes in tiny_gpt.py, each as edits of solutions/tiny_gpt.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="cache_positions_not_offset",
        why="Rotates the new tokens at positions 0..T-1 on every call: with a cache, each new token is at position 0.",
        diagnosis=("with a cache the new tokens are rotated as if they started at position 0: they sit at T_past .. "
                   "T_past + T - 1, where T_past is the number of cached positions; pass those positions to RoPE."),
        edits=(("q, k = self.rope(q, k, positions)", "q, k = self.rope(q, k)"),),
    ),
    Mistake(
        name="no_rope",
        why="Never rotates the queries and keys: the model knows nothing of positions but what the causal mask leaks.",
        diagnosis=("the queries and keys are never rotated, so attention cannot tell one position from another: "
                   "apply self.rope(q, k, positions) before the scores."),
        edits=(("        q, k = self.rope(q, k, positions)\n", ""),),
    ),
    Mistake(
        name="no_causal_mask",
        why="Leaves the scores unmasked (one token at a time needs no mask), so a prompt's tokens see those after them.",
        diagnosis=("the scores are not masked, so in a call on several tokens (the prompt, training) each token "
                   "sees those after it: block key j for new token t when j > T_past + t."),
        edits=(("scores.masked_fill(~keep, float(\"-inf\")).softmax(dim=-1)", "scores.softmax(dim=-1)"),),
    ),
    Mistake(
        name="mask_not_shifted_by_the_cache",
        why="Builds the keep mask with tril() on the (T, T_past + T) grid: a new token sees only the first keys.",
        diagnosis=("with a cache the causal mask is not shifted: new token t sits at position T_past + t and sees "
                   "keys 0 .. T_past + t, tril(diagonal=T_past) on the (T, T_past + T) grid."),
        edits=((".tril(diagonal=T_past)", ".tril()"),),
    ),
    Mistake(
        name="cache_holds_repeated_heads",
        why="Repeats the key/value heads for the queries before caching them: the cache is n_heads wide, not "
            "n_kv_heads, and grouped-query attention saves nothing.",
        diagnosis=("the cache holds n_heads key/value heads: cache k and v as wk and wv make them, n_kv_heads wide, "
                   "and repeat them for the query heads only after caching."),
        edits=(
            ("        q, k = self.rope(q, k, positions)\n",
             "        k = k.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T, hd)\n"
             "        v = v.repeat_interleave(self.n_rep, dim=1)\n"
             "        q, k = self.rope(q, k, positions)\n"),
            ("        k = k.repeat_interleave(self.n_rep, dim=1)  # (B, nh, T_past + T, hd): query head h reads kv head "
             "h // n_rep\n        v = v.repeat_interleave(self.n_rep, dim=1)\n", ""),
        ),
    ),
    Mistake(
        name="post_norm",
        why="Norms the residual stream after each sublayer (the 2017 Transformer's post-norm), not each sublayer's "
            "input.",
        diagnosis=("the blocks norm the residual stream after each sublayer (post-norm): norm each sublayer's input "
                   "instead, x = x + attention(attention_norm(x)), then x = x + feed_forward(ffn_norm(x))."),
        edits=(
            ("        h, cache = self.attention(self.attention_norm(x), cache)\n        x = x + h\n"
             "        return x + self.feed_forward(self.ffn_norm(x)), cache\n",
             "        h, cache = self.attention(x, cache)\n        x = self.attention_norm(x + h)\n"
             "        return self.ffn_norm(x + self.feed_forward(x)), cache\n"),
        ),
    ),
    Mistake(
        name="no_final_norm",
        why="Feeds the last block's output to the head without the final norm.",
        diagnosis="the last block's output goes to the head without self.norm: logits = head(norm(x)).",
        edits=(("return self.head(self.norm(x)), new_cache", "return self.head(x), new_cache"),),
    ),
    Mistake(
        name="generate_refeeds_the_sequence",
        why="Each step calls the model on the whole sequence so far AND the cache: the cached tokens are counted twice.",
        diagnosis=("each step gives the model the whole sequence and the cache, so the cached tokens come twice: "
                   "after the prompt give it only the new token, model(next_token, cache)."),
        edits=(("logits, cache = model(next_token, cache)", "logits, cache = model(idx, cache)"),),
    ),
    Mistake(
        name="argmax_over_positions",
        why="Takes the argmax over dim 1 of the (B, 1, vocab) last logits: over the positions, not the vocabulary.",
        diagnosis=("the argmax is taken over the wrong dim: the next token is the argmax over the vocabulary, "
                   "logits[:, -1].argmax(dim=-1, keepdim=True), (B, 1)."),
        edits=(("logits[:, -1].argmax(dim=-1, keepdim=True)", "logits[:, -1:].argmax(dim=1)"),),
    ),
)
