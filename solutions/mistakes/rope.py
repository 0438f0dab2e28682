"""Known mistakes in rope.py, each as edits of solutions/rope.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="half_split_pairing",
        why="Pairs feature i with feature i + head_dim/2 (Hugging Face's rotate_half), not the adjacent (2i, 2i+1).",
        diagnosis=("the pairs are the two halves (Hugging Face's rotate_half): this kit pairs adjacent features "
                   "(2i, 2i+1), x[..., 0::2] and x[..., 1::2], as Meta's llama."),
        edits=(
            ("x_even, x_odd = x[..., 0::2], x[..., 1::2]",
             "x_even, x_odd = x[..., : x.size(-1) // 2], x[..., x.size(-1) // 2 :]"),
            ("torch.stack((out_even, out_odd), dim=-1).flatten(-2)", "torch.cat((out_even, out_odd), dim=-1)"),
        ),
    ),
    Mistake(
        name="exponent_i_not_2i",
        why="Uses base^(-i/head_dim) with i = 0 .. head_dim/2 - 1: the frequencies fall half as fast as they should.",
        diagnosis=("the frequencies are base^(-i/head_dim): the exponent is -2i/head_dim, "
                   "torch.arange(0, head_dim, 2) / head_dim."),
        edits=(("torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim",
                "torch.arange(head_dim // 2, dtype=torch.float32) / head_dim"),),
    ),
    Mistake(
        name="rotates_backwards",
        why="Flips the sign of sin: every pair turns by -angle, still relative, but not the contract's rotation.",
        diagnosis=("each pair turns the other way (by -angle): out[2i] = x[2i] cos - x[2i+1] sin and "
                   "out[2i+1] = x[2i] sin + x[2i+1] cos."),
        edits=(
            ("out_even = x_even * cos - x_odd * sin", "out_even = x_even * cos + x_odd * sin"),
            ("out_odd = x_even * sin + x_odd * cos", "out_odd = -x_even * sin + x_odd * cos"),
        ),
    ),
    Mistake(
        name="positions_ignored",
        why="Always takes rows 0..T-1 of the tables, whatever positions it is given.",
        diagnosis=("the positions argument is ignored, so every call starts at position 0: take the rows "
                   "cos[positions], sin[positions] when it is given."),
        edits=(("    if positions is None:\n        cos, sin = cos[:T], sin[:T]  # (T, head_dim/2): positions 0..T-1\n"
                "    else:\n        cos, sin = cos[positions], sin[positions]  # (T, head_dim/2): the rows of the "
                "given positions\n",
                "    cos, sin = cos[:T], sin[:T]  # (T, head_dim/2)\n"),),
    ),
    Mistake(
        name="only_queries_rotated",
        why="RotaryEmbedding rotates the queries and returns the keys unrotated.",
        diagnosis=("RotaryEmbedding returns the keys unrotated: rotate k as well as q, with the same positions, "
                   "so that their scores depend on the distance."),
        edits=(("apply_rope(q, self.cos, self.sin, positions), apply_rope(k, self.cos, self.sin, positions)",
                "apply_rope(q, self.cos, self.sin, positions), k"),),
    ),
    Mistake(
        name="tables_are_plain_attributes",
        why="Stores cos and sin as plain attributes: not buffers, so not moved by .to() nor saved in state_dict.",
        diagnosis=("cos and sin are plain attributes, not moved by .to() nor saved: register them with "
                   "self.register_buffer('cos', cos) and self.register_buffer('sin', sin)."),
        edits=(
            ('self.register_buffer("cos", cos)', "self.cos = cos"),
            ('self.register_buffer("sin", sin)', "self.sin = sin"),
        ),
    ),
    Mistake(
        name="float64_tables",
        why="Computes the tables in float64 and keeps them so: the contract's tables are float32.",
        diagnosis="the cos and sin tables are float64: build them in float32, or cast them with .float().",
        edits=(
            ("torch.arange(0, head_dim, 2, dtype=torch.float32)", "torch.arange(0, head_dim, 2, dtype=torch.float64)"),
            ("torch.arange(max_seq_len, dtype=torch.float32)", "torch.arange(max_seq_len, dtype=torch.float64)"),
        ),
    ),
)
