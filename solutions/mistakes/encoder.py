"""Known mistakes in encoder.py, each as edits of solutions/encoder.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="causal_self_attention",
        why="Builds the encoder's self-attention with is_causal=True, hiding later source tokens.",
        diagnosis=("the encoder's self-attention is causal, hiding later source tokens: build it with "
                   "is_causal=False."),
        edits=(("is_causal=False)", "is_causal=True)"),),
    ),
    Mistake(
        name="mask_not_passed",
        why="Never hands the padding mask to self-attention: self_attn(y, y, y).",
        diagnosis="the padding mask never reaches self-attention: call self_attn(y, y, y, mask).",
        edits=(("self.self_attn(y, y, y, mask)", "self.self_attn(y, y, y)"),),
    ),
    Mistake(
        name="no_final_norm",
        why="Creates norm but never applies it after the last layer.",
        diagnosis="self.norm is never applied: run it once after the last layer.",
        edits=(("return self.norm(x)", "return x"),),
    ),
    Mistake(
        name="norm_after_every_layer",
        why="Applies the final norm after every layer instead of once after the stack.",
        diagnosis="the final norm runs after every layer: apply self.norm once, after the whole stack.",
        edits=(
            ("x = layer(x, mask)", "x = self.norm(layer(x, mask))"),
            ("return self.norm(x)", "return x"),
        ),
    ),
    Mistake(
        name="residual1_reused",
        why="Wraps the feed-forward in residual1 again, so residual2 (and its LayerNorm) is never used.",
        diagnosis=("the feed-forward goes through residual1 again, so residual2 is unused: wrap it in "
                   "self.residual2."),
        edits=(("return self.residual2(x, self.feed_forward)", "return self.residual1(x, self.feed_forward)"),),
    ),
    Mistake(
        name="shared_layer",
        why="Repeats one layer object, nn.ModuleList([EncoderLayer(...)] * n_layers), so all layers share weights.",
        diagnosis=("all layers share one set of weights ([EncoderLayer(...)] * n_layers): build a new layer for "
                   "each, nn.ModuleList(EncoderLayer(...) for _ in range(n_layers))."),
        edits=(
            (
                "nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))",
                "nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout)] * n_layers)",
            ),
        ),
    ),
    Mistake(
        name="layer_dropout_default",
        why="EncoderLayer's dropout defaults to 0.1 instead of the contract's 0.0.",
        diagnosis=("EncoderLayer built without a dropout argument drops in training mode: the default is 0.0, "
                   "EncoderLayer(d_model, n_heads, d_ff, dropout=0.0)."),
        edits=(("def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0)",
                "def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1)"),),
    ),
    Mistake(
        name="encoder_dropout_default",
        why="Encoder's dropout defaults to 0.1 instead of the contract's 0.0.",
        diagnosis=("Encoder built without a dropout argument drops in training mode: the default is 0.0, "
                   "Encoder(n_layers, d_model, n_heads, d_ff, dropout=0.0)."),
        edits=(("def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0)",
                "def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1)"),),
    ),
    Mistake(
        name="feed_forward_without_dropout",
        why="EncoderLayer builds FeedForward(d_model, d_ff) without handing on its dropout.",
        diagnosis=("the feed-forward of EncoderLayer never drops: hand dropout on, FeedForward(d_model, d_ff, "
                   "dropout)."),
        edits=(("self.feed_forward = FeedForward(d_model, d_ff, dropout)",
                "self.feed_forward = FeedForward(d_model, d_ff)"),),
    ),
    Mistake(
        name="attention_output_dropped_twice",
        why="Drops the attention output inside residual1's lambda as well, so it is dropped twice (three times "
            "with MultiHeadAttention's own dropout after wo).",
        diagnosis=("the attention output is dropped once more inside the residual's lambda: ResidualConnection "
                   "already drops its sublayer's output, so write self.residual1(x, lambda y: self.self_attn(y, y, "
                   "y, mask))."),
        edits=(("lambda y: self.self_attn(y, y, y, mask))",
                "lambda y: self.residual1.dropout(self.self_attn(y, y, y, mask)))"),),
    ),
)
