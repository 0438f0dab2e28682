"""Known mistakes in masking.py, each as edits of solutions/masking.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="causal_mask_blocks_diagonal",
        why="The additive mask uses triu(diagonal=0), so the diagonal is -inf too and position 0 sees nothing.",
        diagnosis=("causal_mask blocks the diagonal too: use triu(..., diagonal=1), so each position still sees "
                   "itself."),
        edits=(("torch.triu(mask, diagonal=1)", "torch.triu(mask, diagonal=0)"),),
    ),
    Mistake(
        name="causal_mask_zero_one",
        why="The additive mask holds 0 and 1 instead of 0 and -inf: adding 1 to a score blocks nothing.",
        diagnosis=("causal_mask holds 0 and 1: an additive mask needs -inf above the diagonal (adding 1 blocks "
                   "nothing)."),
        edits=(('torch.full((1, 1, seq_len, seq_len), float("-inf"))', "torch.ones(1, 1, seq_len, seq_len)"),),
    ),
    Mistake(
        name="course_notes_version1_in_place",
        why="The course notes' version 1 verbatim: averages in place, so later rows average rows already averaged.",
        diagnosis=("causal_average overwrites x while averaging, so later rows average rows already averaged: "
                   "write the means into a new tensor."),
        edits=(
            (
                "    T = x.size(1)\n"
                "    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))  # (T, T)\n"
                "    weights = weights / weights.sum(dim=1, keepdim=True)  # row t spreads 1/(t+1) over 0..t\n"
                "    return weights @ x  # (T, T) @ (B, T, C) -> (B, T, C)\n",
                "    x = x.clone()\n"
                "    for i in range(x.size(1)):\n"
                "        x[:, i] = torch.mean(x[:, : i + 1], dim=1)\n"
                "    return x\n",
            ),
        ),
    ),
    Mistake(
        name="divides_by_T",
        why="Divides the running sum by T instead of t+1, so early positions are shrunk towards 0.",
        diagnosis=("causal_average divides the running sum by T: divide row t by t + 1, the number of positions "
                   "it averages."),
        edits=(
            (
                "    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))  # (T, T)\n"
                "    weights = weights / weights.sum(dim=1, keepdim=True)  # row t spreads 1/(t+1) over 0..t\n"
                "    return weights @ x  # (T, T) @ (B, T, C) -> (B, T, C)\n",
                "    return x.cumsum(dim=1) / T\n",
            ),
        ),
    ),
    Mistake(
        name="float32_weights",
        why="Builds the averaging weights in float32 whatever x's dtype, so float64 inputs fail in the matmul.",
        diagnosis=("the averaging weights are always float32, so float64 inputs fail: build them with "
                   "dtype=x.dtype and device=x.device."),
        edits=(("torch.ones(T, T, dtype=x.dtype, device=x.device)", "torch.ones(T, T, device=x.device)"),),
    ),
    Mistake(
        name="look_ahead_mask_inverted",
        why="The look-ahead mask marks the blocked future with 1 (triu) instead of the kept past and present.",
        diagnosis=("create_look_ahead_mask marks the future instead of the past: it is a keep mask, so use tril "
                   "(1 on and below the diagonal)."),
        edits=(("torch.ones(seq_len, seq_len).tril()", "torch.ones(seq_len, seq_len).triu(diagonal=1)"),),
    ),
    Mistake(
        name="look_ahead_mask_without_diagonal",
        why="The look-ahead mask uses tril(diagonal=-1), so a position may not attend to itself.",
        diagnosis=("create_look_ahead_mask leaves out the diagonal: use tril with the default diagonal=0, so a "
                   "position may attend to itself."),
        edits=(("torch.ones(seq_len, seq_len).tril()", "torch.ones(seq_len, seq_len).tril(diagonal=-1)"),),
    ),
    Mistake(
        name="loop_over_positions",
        why="Averages with a Python loop over T: right values, but not vectorised (loses only the vectorisation "
            "points).",
        diagnosis=("causal_average loops over the positions in Python: build the (T, T) averaging weights once "
                   "and use one matrix product, weights @ x."),
        edits=(
            (
                "    T = x.size(1)\n"
                "    weights = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))  # (T, T)\n"
                "    weights = weights / weights.sum(dim=1, keepdim=True)  # row t spreads 1/(t+1) over 0..t\n"
                "    return weights @ x  # (T, T) @ (B, T, C) -> (B, T, C)\n",
                "    out = torch.empty_like(x)\n"
                "    for t in range(x.size(1)):\n"
                "        out[:, t] = x[:, : t + 1].mean(dim=1)\n"
                "    return out\n",
            ),
        ),
    ),
    Mistake(
        name="masks_without_leading_dims",
        why="Returns both masks as (seq_len, seq_len), without the two leading broadcast dims.",
        diagnosis=("the masks are (seq_len, seq_len): return them as (1, 1, seq_len, seq_len) so they broadcast "
                   "over batch and heads."),
        edits=(
            (".tril().view(1, 1, seq_len, seq_len)", ".tril()"),
            ("torch.full((1, 1, seq_len, seq_len),", "torch.full((seq_len, seq_len),"),
        ),
    ),
    Mistake(
        name="masks_zero_scores",
        why="Course notes' version 3 on real scores: blocks wherever tril(weight) == 0, so a genuine score of 0 "
            "too.",
        diagnosis=("weight_mask_and_normalization also blocks genuine scores of 0: build the mask from "
                   "torch.tril(torch.ones(T, T)), not from the scores."),
        edits=(
            (
                'return weight.masked_fill(~keep, float("-inf"))',
                'return weight.tril().masked_fill(weight.tril() == 0, float("-inf"))',
            ),
        ),
    ),
    Mistake(
        name="softmax_over_rows",
        why="Masks correctly but takes the softmax over dim=-2 (down each column) instead of along each row.",
        diagnosis=("weight_mask_and_normalization takes the softmax down each column: use dim=-1, so each row "
                   "sums to 1."),
        edits=((".softmax(dim=-1)", ".softmax(dim=-2)"),),
    ),
    Mistake(
        name="weight_mask_2d_only",
        why="Sizes the tril mask from weight.shape[0], which is T only for 2D scores: leading batch dims break it.",
        diagnosis=("weight_mask_and_normalization takes T from weight.shape[0], which breaks with leading batch "
                   "dims: use weight.size(-1)."),
        edits=(("T = weight.size(-1)", "T = weight.shape[0]"),),
    ),
)
