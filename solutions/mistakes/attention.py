"""Known mistakes in attention.py, each as edits of solutions/attention.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="dropout_on_output",
        why="Applies dropout to the output instead of the attention weights.",
        diagnosis=("dropout is applied to the output instead of the attention weights: apply it to p_attn right "
                   "after the softmax, then multiply by value."),
        edits=(("p_attn = dropout(p_attn)", "return dropout(p_attn @ value), p_attn"),),
    ),
    Mistake(
        name="float32_drift",
        why="Casts everything to float32, so float64 inputs come back as float32.",
        diagnosis=("float64 inputs come back as float32: keep the inputs' dtype, without .float() or "
                   "dtype=torch.float32."),
        edits=(
            (
                "    d_k = query.size(-1)\n",
                "    query, key, value = query.float(), key.float(), value.float()\n"
                "    d_k = query.size(-1)\n",
            ),
        ),
    ),
    Mistake(
        name="mask_after_softmax",
        why="Zeroes blocked weights after the softmax, so the rows no longer sum to 1.",
        diagnosis=("blocked weights are zeroed after the softmax, so rows no longer sum to 1: fill the blocked "
                   "scores with -inf before the softmax."),
        edits=(
            (
                "    if mask is not None:\n"
                '        scores = scores.masked_fill(mask == 0, float("-inf"))  # blocked keys get weight 0\n'
                "    p_attn = scores.softmax(dim=-1)  # (..., L_q, L_k), each row sums to 1\n",
                "    p_attn = scores.softmax(dim=-1)\n"
                "    if mask is not None:\n"
                "        p_attn = p_attn.masked_fill(mask == 0, 0.0)\n",
            ),
        ),
    ),
    Mistake(
        name="mask_ignored",
        why="Accepts a mask but never applies it, so blocked keys still get weight.",
        diagnosis="the mask is never applied: set the scores where mask == 0 to -inf before the softmax.",
        edits=(
            (
                "    if mask is not None:\n"
                '        scores = scores.masked_fill(mask == 0, float("-inf"))  # blocked keys get weight 0\n',
                "",
            ),
        ),
    ),
    Mistake(
        name="mask_inverted",
        why="Reads the mask backwards: blocks the keys marked True and keeps the ones marked False.",
        diagnosis="the mask is read backwards (True blocks): it is a keep mask, so block where mask == 0.",
        edits=(("mask == 0", "mask != 0"),),
    ),
    Mistake(
        name="naive_softmax",
        why="Hand-written softmax exp(x) / sum(exp(x)) without subtracting the row max: large scores overflow to "
            "NaN.",
        diagnosis=("large scores overflow to NaN in a hand-written exp(x) / sum(exp(x)): use torch.softmax, which"
                   " subtracts the row max."),
        edits=(("p_attn = scores.softmax(dim=-1)", "p_attn = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),),
    ),
    Mistake(
        name="no_scaling",
        why="Forgets to divide the scores by sqrt(d_k).",
        diagnosis="the scores are not scaled: divide query @ key^T by sqrt(d_k).",
        edits=((" / math.sqrt(d_k)", ""),),
    ),
    Mistake(
        name="returns_weights_before_dropout",
        why="Uses the dropped-out weights for the output but returns the weights from before dropout.",
        diagnosis=("the returned weights are those from before dropout: return the same dropped-out p_attn you "
                   "multiply with value."),
        edits=(("p_attn = dropout(p_attn)", "return dropout(p_attn) @ value, p_attn"),),
    ),
    Mistake(
        name="scale_by_dk",
        why="Divides the scores by d_k instead of sqrt(d_k).",
        diagnosis="the scores are divided by d_k: divide by sqrt(d_k) instead.",
        edits=(("math.sqrt(d_k)", "d_k"),),
    ),
    Mistake(
        name="scale_by_dv",
        why="Scales by the square root of the value width d_v instead of the key width d_k.",
        diagnosis="the scores are scaled by the value width d_v: scale by sqrt(d_k), the width of query and key.",
        edits=(("math.sqrt(d_k)", "math.sqrt(value.size(-1))"),),
    ),
    Mistake(
        name="softmax_over_queries",
        why="Takes the softmax over the queries (dim=-2) instead of over the keys (dim=-1).",
        diagnosis=("your weights equal softmax over the query axis: use dim=-1, so each query's weights over the "
                   "keys sum to 1."),
        edits=(("softmax(dim=-1)", "softmax(dim=-2)"),),
    ),
    Mistake(
        name="swapped_outputs",
        why="Returns (p_attn, output) instead of (output, p_attn).",
        diagnosis="the two results come back in the wrong order: return (output, p_attn).",
        edits=(("return p_attn @ value, p_attn", "return p_attn, p_attn @ value"),),
    ),
    Mistake(
        name="transpose_last_two_only_2d",
        why="Transposes the keys with key.t(), which only works without batch or head dims.",
        diagnosis="key.t() fails with batch or head dims: transpose the last two dims with key.transpose(-2, -1).",
        edits=(("key.transpose(-2, -1)", "key.t()"),),
    ),
)
