"""Known mistakes in flash_attention.py, each as edits of solutions/flash_attention.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="output_not_rescaled",
        why="Rescales the running sum but not the running output when the maximum grows: wrong whenever a later tile "
            "holds a larger score.",
        diagnosis=("the running output is not rescaled when the maximum grows: multiply acc by alpha = exp(m - m_new) "
                   "before adding p @ v, as you do for the sum."),
        edits=(("acc = alpha[..., None] * acc + p @ v_blk", "acc = acc + p @ v_blk"),),
    ),
    Mistake(
        name="sum_not_rescaled",
        why="Rescales the running output but not the running sum when the maximum grows.",
        diagnosis=("the running sum is not rescaled when the maximum grows: l = alpha * l + rowsum(p), with "
                   "alpha = exp(m - m_new)."),
        edits=(("l = alpha * l + p.sum(dim=-1)", "l = l + p.sum(dim=-1)"),),
    ),
    Mistake(
        name="normalised_per_tile",
        why="Divides each tile's p @ v by the running sum so far, inside the loop, instead of dividing once at the "
            "end: the early tiles are divided by a sum that is still too small.",
        diagnosis=("each tile is divided by the sum so far, inside the loop: accumulate the unnormalised p @ v "
                   "and divide by l once, after the last tile."),
        edits=(
            ("acc = alpha[..., None] * acc + p @ v_blk", "acc = alpha[..., None] * acc + p @ v_blk / l[..., None]"),
            ("outs.append(acc / l[..., None])", "outs.append(acc)"),
        ),
    ),
    Mistake(
        name="lse_is_the_max",
        why="Returns the running maximum as the log-sum-exp, leaving out log(l).",
        diagnosis="lse is only the row's maximum: the log-sum-exp is m + log(l).",
        edits=(("lses.append(m + torch.log(l))", "lses.append(m)"),),
    ),
    Mistake(
        name="lse_without_the_max",
        why="Returns log(l), the log of the sum of exp(s - m), forgetting to add back the maximum m.",
        diagnosis="lse is log(l) without the maximum: l sums exp(s - m), so the log-sum-exp is m + log(l).",
        edits=(("lses.append(m + torch.log(l))", "lses.append(torch.log(l))"),),
    ),
    Mistake(
        name="lse_in_base_2",
        why="Returns the log-sum-exp in base 2, as Triton's FlashAttention kernel keeps it (m * log2(e) + log2(l)).",
        diagnosis=("lse is in base 2 (log2, as Triton's kernel keeps it): the contract's lse is the natural log, "
                   "m + torch.log(l)."),
        edits=(("lses.append(m + torch.log(l))", "lses.append(m * math.log2(math.e) + torch.log2(l))"),),
    ),
    Mistake(
        name="causal_mask_with_tile_indices",
        why="Builds the causal mask from the indices inside each tile, not the global positions: every tile is "
            "masked as if it sat on the diagonal.",
        diagnosis=("the causal mask compares positions inside the tile: compare global positions, the tile's "
                   "offset plus the index in it (rows i + r, keys j + c)."),
        edits=(
            ("rows = torch.arange(i, i + q_blk.size(-2), device=q.device)",
             "rows = torch.arange(q_blk.size(-2), device=q.device)"),
            ("cols = torch.arange(j, j + k_blk.size(-2), device=q.device)",
             "cols = torch.arange(k_blk.size(-2), device=q.device)"),
        ),
    ),
    Mistake(
        name="not_scaled",
        why="Forgets to divide the scores by sqrt(d).",
        diagnosis="the scores are not scaled: multiply q k^T by 1 / sqrt(d), once.",
        edits=(("q_blk = q[..., i:i + block_size, :] * scale", "q_blk = q[..., i:i + block_size, :]"),),
    ),
    Mistake(
        name="scaled_twice",
        why="Scales the queries and then the tile's scores again: the scores are divided by d, not sqrt(d).",
        diagnosis=("the scores are scaled twice (divided by d): apply 1 / sqrt(d) once, to the queries or to the "
                   "scores, not both."),
        edits=(("s = q_blk @ k_blk.transpose(-2, -1)", "s = q_blk @ k_blk.transpose(-2, -1) * scale"),),
    ),
    Mistake(
        name="materialises_the_scores",
        why="Right output, but computes the whole (T_q, T_k) matrix of scores at once (plain attention): its "
            "memory grows with T_q * T_k.",
        diagnosis=("the output is right, but the whole (T_q, T_k) score matrix is held at once: compute the scores "
                   "block_size keys at a time, with a running maximum and sum."),
        edits=(
            ("    outs, lses = [], []\n",
             "    s = q @ k.transpose(-2, -1) * scale  # (..., T_q, T_k), all at once\n"
             "    if causal:\n"
             "        s = s.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1), "
             "float(\"-inf\"))\n"
             "    return s.softmax(dim=-1) @ v, s.logsumexp(dim=-1)\n"
             "    outs, lses = [], []\n"),
        ),
    ),
)
