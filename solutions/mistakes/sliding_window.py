"""Known mistakes in sliding_window.py, each as edits of solutions/sliding_window.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="window_off_by_one",
        why="Keeps keys with i - j <= window: window + 1 positions, one more than the window.",
        diagnosis="the window keeps window + 1 positions (i - j <= window): keep i - j < window, itself included.",
        edits=(("(i - j < window)", "(i - j <= window)"),),
    ),
    Mistake(
        name="window_not_causal",
        why="Keeps keys within the window on both sides, |i - j| < window: the queries see the next positions too.",
        diagnosis="the window reaches into the future (|i - j| < window): keep j <= i as well.",
        edits=(("return (j <= i) & (i - j < window)", "return (i - j).abs() < window"),),
    ),
    Mistake(
        name="padding_on_the_query_axis",
        why="Broadcasts the key padding along the queries, (B, 1, T, 1), instead of along the keys.",
        diagnosis=("the padding mask blocks queries instead of keys: broadcast key_padding as [:, None, None, :], "
                   "(B, 1, 1, T_k)."),
        edits=(("key_padding.bool()[:, None, None, :]", "key_padding.bool()[:, None, :, None]"),),
    ),
    Mistake(
        name="empty_rows_nan",
        why="Softmaxes a row whose every key is blocked as it is: all -inf, so 0/0 = NaN.",
        diagnosis=("a query with no key left gets NaN (softmax of a row of -inf): give such rows finite scores, "
                   "then zero their weights."),
        edits=(
            ("    scores = scores.masked_fill(empty, 0.0)\n", ""),
            ("p_attn = scores.softmax(dim=-1).masked_fill(empty, 0.0)", "p_attn = scores.softmax(dim=-1)"),
        ),
    ),
    Mistake(
        name="empty_rows_uniform",
        why="Blocks with -1e9 and nothing more: a row whose every key is blocked gets uniform weights, 1/T_k each.",
        diagnosis=("a query with no key left averages every value (a -1e9 fill gives uniform weights): zero the "
                   "weights of rows that keep no key."),
        edits=(
            ('scores = scores.masked_fill(~allowed, float("-inf"))', "scores = scores.masked_fill(~allowed, -1e9)"),
            ("    scores = scores.masked_fill(empty, 0.0)\n", ""),
            ("p_attn = scores.softmax(dim=-1).masked_fill(empty, 0.0)", "p_attn = scores.softmax(dim=-1)"),
        ),
    ),
    Mistake(
        name="cache_unbounded",
        why="Appends to the cache and never drops anything: it grows with every token.",
        diagnosis="the cache keeps every position: keep only the last window along dim 2, [:, :, -window:].",
        edits=(("self.k, self.v = self.k[:, :, -self.window:], self.v[:, :, -self.window:]  # drop the oldest",
                "pass"),),
    ),
    Mistake(
        name="cache_drops_the_newest",
        why="Keeps the first window positions, [:, :, :window], so the newest tokens are the ones dropped.",
        diagnosis="the cache keeps the oldest positions and drops the newest: keep the last window, [:, :, -window:].",
        edits=(("self.k[:, :, -self.window:], self.v[:, :, -self.window:]",
                "self.k[:, :, :self.window], self.v[:, :, :self.window]"),),
    ),
)
