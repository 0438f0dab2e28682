"""Known mistakes in positional_encoding.py, each as edits of solutions/positional_encoding.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="adds_the_whole_table",
        why="Adds pe[:, :max_len], the whole table, instead of the first T rows.",
        diagnosis="the whole pe table is added: add only its first T rows, self.pe[:, :T].",
        edits=(("self.pe[:, :T]", "self.pe"),),
    ),
    Mistake(
        name="dropout_before_addition",
        why="Applies dropout to x before adding pe, instead of to the sum.",
        diagnosis="dropout is applied to x before adding pe: apply it to the sum, dropout(x + pe[:, :T]).",
        edits=(("self.dropout(x + self.pe[:, :T])", "self.dropout(x) + self.pe[:, :T]"),),
    ),
    Mistake(
        name="exponent_i_not_2i",
        why="Uses 10000^(i/d_model) with i = column // 2, i.e. i where the formula has 2i.",
        diagnosis=("the frequencies use 10000^(i/d_model): the exponent is 2i/d_model, i.e. the even column index"
                   " over d_model."),
        edits=(
            ("torch.arange(0, d_model, 2, dtype=torch.float32)", "torch.arange(0, d_model // 2, dtype=torch.float32)"),
        ),
    ),
    Mistake(
        name="float64_table",
        why="Builds the table in float64 and keeps it so: float32 inputs come back as float64.",
        diagnosis="the pe table is float64, so float32 inputs come back as float64: build or store it in float32.",
        edits=(
            ("torch.arange(max_len, dtype=torch.float32)", "torch.arange(max_len, dtype=torch.float64)"),
            ("torch.arange(0, d_model, 2, dtype=torch.float32)", "torch.arange(0, d_model, 2, dtype=torch.float64)"),
            ("pe = torch.zeros(max_len, d_model)", "pe = torch.zeros(max_len, d_model, dtype=torch.float64)"),
        ),
    ),
    Mistake(
        name="no_batch_dim",
        why="Stores pe as (max_len, d_model), without the leading batch dim (forward still adds the right rows).",
        diagnosis="pe is stored as (max_len, d_model): keep the leading batch dim, (1, max_len, d_model).",
        edits=(
            ('self.register_buffer("pe", pe.unsqueeze(0))', 'self.register_buffer("pe", pe)'),
            ("self.pe[:, :T]", "self.pe[:T]"),
        ),
    ),
    Mistake(
        name="no_dropout",
        why="Creates the dropout but never applies it.",
        diagnosis="self.dropout is never applied: return self.dropout(x + self.pe[:, :T]).",
        edits=(("return self.dropout(x + self.pe[:, :T])", "return x + self.pe[:, :T]"),),
    ),
    Mistake(
        name="pe_is_a_parameter",
        why="Registers pe as an nn.Parameter, so the optimiser would train it.",
        diagnosis=("pe is an nn.Parameter, which an optimiser would train: register it with "
                   "self.register_buffer('pe', ...)."),
        edits=(('self.register_buffer("pe", pe.unsqueeze(0))', "self.pe = nn.Parameter(pe.unsqueeze(0))"),),
    ),
    Mistake(
        name="pe_is_a_plain_attribute",
        why="Stores pe as a plain attribute: not a buffer, so not saved in state_dict nor moved by .to().",
        diagnosis=("pe is a plain attribute, so it is not saved nor moved by .to(): register it with "
                   "self.register_buffer('pe', ...)."),
        edits=(('self.register_buffer("pe", pe.unsqueeze(0))', "self.pe = pe.unsqueeze(0)"),),
    ),
    Mistake(
        name="positions_start_at_one",
        why="Numbers the positions 1..max_len instead of 0..max_len-1.",
        diagnosis="the positions are numbered from 1: number them 0..max_len-1 (torch.arange(max_len)).",
        edits=(("torch.arange(max_len, dtype=torch.float32)", "torch.arange(1, max_len + 1, dtype=torch.float32)"),),
    ),
    Mistake(
        name="sin_cos_swapped",
        why="Puts cos in the even columns and sin in the odd ones.",
        diagnosis="sin and cos are swapped: sin goes in the even columns (0::2), cos in the odd ones (1::2).",
        edits=(
            ("pe[:, 0::2] = torch.sin(", "pe[:, 0::2] = torch.cos("),
            ("pe[:, 1::2] = torch.cos(", "pe[:, 1::2] = torch.sin("),
        ),
    ),
    Mistake(
        name="fixed_dropout",
        why="PositionalEncoding builds nn.Dropout(0.1), a fixed probability, instead of nn.Dropout(dropout).",
        diagnosis=("PositionalEncoding drops with a fixed probability, whatever dropout it was given: "
                   "self.dropout = nn.Dropout(dropout)."),
        edits=(("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)"),),
    ),
)
