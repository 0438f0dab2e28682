"""Known mistakes in head_attention.py, each as edits of solutions/head_attention.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="bias_true",
        why="Gives the key, query and value layers a bias (nn.Linear's default) instead of bias=False.",
        diagnosis="key, query and value have a bias: build them with nn.Linear(n_embd, head_size, bias=False).",
        edits=(
            (
                "self.key = nn.Linear(n_embd, head_size, bias=False)",
                "self.key = nn.Linear(n_embd, head_size, bias=True)",
            ),
            (
                "self.query = nn.Linear(n_embd, head_size, bias=False)",
                "self.query = nn.Linear(n_embd, head_size, bias=True)",
            ),
            (
                "self.value = nn.Linear(n_embd, head_size, bias=False)",
                "self.value = nn.Linear(n_embd, head_size, bias=True)",
            ),
        ),
    ),
    Mistake(
        name="dropout_on_output",
        why="Applies dropout to the output instead of the attention weights.",
        diagnosis=("dropout is applied to the output instead of the attention weights: apply self.dropout to the "
                   "weights after the softmax."),
        edits=(
            ("        wei = self.dropout(wei)\n", ""),
            ("return wei @ v", "return self.dropout(wei @ v)"),
        ),
    ),
    Mistake(
        name="mask_not_sliced",
        why="Masks with the whole (block_size, block_size) tril instead of tril[:T, :T], so it fails for T < "
            "block_size.",
        diagnosis=("the whole tril is used as the mask, which fails when T < block_size: mask with self.tril[:T, "
                   ":T]."),
        edits=(("self.tril[:T, :T] == 0", "self.tril == 0"),),
    ),
    Mistake(
        name="mask_transposed",
        why="Masks with triu instead of tril: each token attends to itself and the future, not the past.",
        diagnosis="the mask keeps the future instead of the past (triu): mask where self.tril[:T, :T] == 0.",
        edits=(("self.tril[:T, :T] == 0", "self.tril[:T, :T].T == 0"),),
    ),
    Mistake(
        name="no_causal_mask",
        why="Forgets the causal mask: every token also attends to the tokens after it.",
        diagnosis=("there is no causal mask, so tokens see the future: fill the scores where self.tril[:T, :T] =="
                   " 0 with -inf."),
        edits=(
            (
                '        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T), the future is blocked\n',
                "",
            ),
        ),
    ),
    Mistake(
        name="scale_by_n_embd",
        why="Scales the scores by 1/sqrt(n_embd), the width of x, instead of 1/sqrt(head_size).",
        diagnosis="the scores are scaled by 1/sqrt(n_embd): scale by 1/sqrt(head_size), the width of the keys.",
        edits=(("/ math.sqrt(k.size(-1))", "* C**-0.5"),),
    ),
    Mistake(
        name="softmax_over_queries",
        why="Takes the softmax over dim=1, the queries, instead of over the last dim, the keys.",
        diagnosis="your weights equal softmax over the query axis: use dim=-1, over the keys.",
        edits=(("wei.softmax(dim=-1)", "wei.softmax(dim=1)"),),
    ),
    Mistake(
        name="tril_parameter",
        why="Makes tril an nn.Parameter instead of a buffer, so an optimizer would train the mask.",
        diagnosis=("tril is an nn.Parameter, which an optimiser would train: register it with "
                   "self.register_buffer('tril', ...)."),
        edits=(
            (
                'self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))',
                "self.tril = nn.Parameter(torch.tril(torch.ones(block_size, block_size)))",
            ),
        ),
    ),
    Mistake(
        name="tril_plain_attribute",
        why="Keeps tril as a plain tensor attribute, not a registered buffer: not in state_dict, not moved by "
            ".to().",
        diagnosis=("tril is a plain attribute, so it is not saved nor moved by .to(): register it with "
                   "self.register_buffer('tril', ...)."),
        edits=(
            (
                'self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))',
                "self.tril = torch.tril(torch.ones(block_size, block_size))",
            ),
        ),
    ),
    Mistake(
        name="dropout_default",
        why="HeadAttention's dropout defaults to 0.1 instead of the contract's 0.0.",
        diagnosis=("HeadAttention built without a dropout argument drops in training mode: the default is 0.0, "
                   "HeadAttention(n_embd, head_size, block_size, dropout=0.0)."),
        edits=(("block_size: int, dropout: float = 0.0)", "block_size: int, dropout: float = 0.1)"),),
    ),
)
