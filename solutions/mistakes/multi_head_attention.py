"""Known mistakes in multi_head_attention.py, each as edits of solutions/multi_head_attention.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="causal_mask_ignored",
        why="Registers the causal mask buffer but never adds it to the scores.",
        diagnosis=("the causal mask buffer is never used: add self.mask[:, :, :T_q, :T_k] to the scores before "
                   "the softmax."),
        edits=(
            (
                "        if self.is_causal:\n"
                "            scores = scores + self.mask[:, :, :T_q, :T_k]  # 0 on and below the diagonal, -inf above\n",
                "",
            ),
        ),
    ),
    Mistake(
        name="causal_mask_not_sliced",
        why="Adds the whole (max_seq_len, max_seq_len) causal mask instead of its [:T_q, :T_k] corner, so it "
            "fails for sequences shorter than max_seq_len.",
        diagnosis=("the whole causal mask is added, which fails for T < max_seq_len: add its corner self.mask[:, "
                   ":, :T_q, :T_k]."),
        edits=(("scores + self.mask[:, :, :T_q, :T_k]", "scores + self.mask"),),
    ),
    Mistake(
        name="keep_mask_ignored",
        why="Accepts the extra keep mask but never applies it.",
        diagnosis="the keep mask passed to forward is never applied: fill the scores where mask == 0 with -inf.",
        edits=(
            (
                "        if mask is not None:\n"
                '            scores = scores.masked_fill(mask == 0, float("-inf"))  # the extra keep mask (e.g. padding)\n',
                "",
            ),
        ),
    ),
    Mistake(
        name="keep_mask_replaces_causal",
        why="Uses the extra keep mask instead of the causal mask when both are given, instead of combining them.",
        diagnosis="the keep mask replaces the causal mask: apply both, the causal one and then the keep mask.",
        edits=(
            (
                "if self.is_causal:\n"
                "            scores",
                "if self.is_causal and mask is None:\n"
                "            scores",
            ),
        ),
    ),
    Mistake(
        name="merge_view_without_contiguous",
        why="Merges the heads with .transpose(1, 2).view(...) without .contiguous(), which raises on the "
            "non-contiguous tensor.",
        diagnosis=(".view fails on the transposed heads: merge them with .transpose(1, 2).contiguous().view(B, T,"
                   " dim)."),
        edits=((".transpose(1, 2).contiguous().view(B, T_q, dim)", ".transpose(1, 2).view(B, T_q, dim)"),),
    ),
    Mistake(
        name="merge_without_transpose",
        why="Splits the heads correctly but merges them with a reshape to (B, T, dim) without transposing back, "
            "scrambling tokens and heads.",
        diagnosis=("the heads are merged without transposing back, which scrambles tokens and heads: use "
                   ".transpose(1, 2).contiguous().view(B, T, dim)."),
        edits=(("(p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)", "(p_attn @ xv).reshape(B, T_q, dim)"),),
    ),
    Mistake(
        name="no_divisibility_check",
        why="Never checks dim % n_heads, so dim 10 with 4 heads silently builds a broken module.",
        diagnosis="dim % n_heads != 0 is accepted: raise ValueError when dim cannot be split into equal heads.",
        edits=(
            (
                "        if args.dim % args.n_heads != 0:\n"
                '            raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}")\n',
                "",
            ),
        ),
    ),
    Mistake(
        name="no_output_projection",
        why="Returns the merged heads without the output projection wo.",
        diagnosis="the merged heads skip the output projection: pass them through self.wo.",
        edits=(("self.resid_dropout(self.wo(out))", "self.resid_dropout(out)"),),
    ),
    Mistake(
        name="no_resid_dropout",
        why="Applies dropout to the attention weights but not to the output (resid_dropout unused).",
        diagnosis="there is no dropout on the output: apply self.resid_dropout after self.wo.",
        edits=(("return self.resid_dropout(self.wo(out))", "return self.wo(out)"),),
    ),
    Mistake(
        name="no_scaling",
        why="Forgets to divide the scores by sqrt(head_dim).",
        diagnosis="the scores are not scaled: divide them by sqrt(head_dim).",
        edits=((" / math.sqrt(self.head_dim)", ""),),
    ),
    Mistake(
        name="reshape_without_transpose",
        why="Splits the heads with a view straight to (B, n_heads, T, head_dim), without the transpose, so one "
            "head gets pieces of several tokens.",
        diagnosis=("the heads are split with a view straight to (B, n_heads, T, head_dim): use .view(B, T, "
                   "n_heads, head_dim).transpose(1, 2)."),
        edits=(
            (
                "self.wq(q).view(B, T_q, self.n_heads, self.head_dim).transpose(1, 2)",
                "self.wq(q).view(B, self.n_heads, T_q, self.head_dim)",
            ),
            (
                "self.wk(k).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)",
                "self.wk(k).view(B, self.n_heads, T_k, self.head_dim)",
            ),
            (
                "self.wv(v).view(B, T_k, self.n_heads, self.head_dim).transpose(1, 2)",
                "self.wv(v).view(B, self.n_heads, T_k, self.head_dim)",
            ),
            ("(p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)", "(p_attn @ xv).reshape(B, T_q, dim)"),
        ),
    ),
    Mistake(
        name="scale_by_dim",
        why="Divides the scores by sqrt(dim), the model width, instead of sqrt(head_dim).",
        diagnosis="the scores are divided by sqrt(dim): divide by sqrt(head_dim), the width of one head.",
        edits=(("math.sqrt(self.head_dim)", "math.sqrt(dim)"),),
    ),
    Mistake(
        name="self_attention_only",
        why="Splits k and v with the length of q (as the course notes do), so cross-attention with T_q != T_k "
            "fails.",
        diagnosis=("k and v are split with the length of q, so cross-attention with T_q != T_k fails: split each "
                   "with its own length."),
        edits=(
            ("self.wk(k).view(B, T_k,", "self.wk(k).view(B, T_q,"),
            ("self.wv(v).view(B, T_k,", "self.wv(v).view(B, T_q,"),
        ),
    ),
    Mistake(
        name="fixed_attention_dropout",
        why="attn_dropout is nn.Dropout(0.1), a fixed probability, instead of nn.Dropout(args.dropout).",
        diagnosis=("the dropout on the attention weights has a fixed probability, whatever args.dropout is: "
                   "self.attn_dropout = nn.Dropout(args.dropout)."),
        edits=(("self.attn_dropout = nn.Dropout(args.dropout)", "self.attn_dropout = nn.Dropout(0.1)"),),
    ),
)
