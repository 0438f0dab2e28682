"""Known mistakes in decoder.py, each as edits of solutions/decoder.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="cross_attn_reads_x",
        why="Cross-attention takes its keys and values from x instead of memory: self-attention twice.",
        diagnosis=("cross-attention takes its keys and values from x: take them from memory, cross_attn(y, "
                   "memory, memory, src_mask)."),
        edits=(("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, y, y)"),),
    ),
    Mistake(
        name="masks_swapped",
        why="Passes src_mask to self-attention and tgt_mask to cross-attention, the other way round.",
        diagnosis="src_mask and tgt_mask are swapped: tgt_mask goes to self-attention, src_mask to cross-attention.",
        edits=(
            ("self.self_attn(y, y, y, tgt_mask)", "self.self_attn(y, y, y, src_mask)"),
            ("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, memory, memory, tgt_mask)"),
        ),
    ),
    Mistake(
        name="memory_normalised",
        why="Passes memory through residual2's LayerNorm before cross-attention instead of using it as it is.",
        diagnosis=("memory goes through residual2's norm: normalise only x, and pass memory to cross-attention as"
                   " it is."),
        edits=(
            (
                "        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))",
                "        kv = self.residual2.norm(memory)\n"
                "        x = self.residual2(x, lambda y: self.cross_attn(y, kv, kv, src_mask))",
            ),
        ),
    ),
    Mistake(
        name="no_final_norm",
        why="Creates norm but never applies it after the last layer.",
        diagnosis="self.norm is never applied: run it once after the last layer.",
        edits=(("return self.norm(x)", "return x"),),
    ),
    Mistake(
        name="self_attn_not_causal",
        why="Builds the decoder's self-attention with is_causal=False, so each position sees the future.",
        diagnosis=("the decoder's self-attention is not causal, so positions see the future: build it with "
                   "is_causal=True."),
        edits=(
            (
                "self.self_attn = MultiHeadAttention(args, is_causal=True)",
                "self.self_attn = MultiHeadAttention(args, is_causal=False)",
            ),
        ),
    ),
    Mistake(
        name="shared_layer",
        why="Repeats one layer object, nn.ModuleList([DecoderLayer(...)] * n_layers), so all layers share weights.",
        diagnosis=("all layers share one set of weights ([DecoderLayer(...)] * n_layers): build a new layer for "
                   "each, nn.ModuleList(DecoderLayer(...) for _ in range(n_layers))."),
        edits=(
            (
                "nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, max_seq_len) for _ in range(n_layers))",
                "nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff, dropout, max_seq_len)] * n_layers)",
            ),
        ),
    ),
    Mistake(
        name="src_mask_not_passed",
        why="Never hands src_mask to cross-attention, so it attends to the source padding.",
        diagnosis=("src_mask never reaches cross-attention, so it attends to source padding: pass it as "
                   "cross_attn's mask."),
        edits=(("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, memory, memory)"),),
    ),
    Mistake(
        name="tgt_mask_ignored",
        why="Relies on the causal mask alone and never hands tgt_mask to self-attention.",
        diagnosis=("tgt_mask never reaches self-attention: pass it as self_attn's mask (the causal mask is added "
                   "on top)."),
        edits=(("self.self_attn(y, y, y, tgt_mask)", "self.self_attn(y, y, y)"),),
    ),
    Mistake(
        name="layer_dropout_default",
        why="DecoderLayer's dropout defaults to 0.1 instead of the contract's 0.0.",
        diagnosis=("DecoderLayer built without a dropout argument drops in training mode: the default is 0.0, "
                   "DecoderLayer(d_model, n_heads, d_ff, dropout=0.0, max_seq_len=512)."),
        edits=(("def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len",
                "def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, max_seq_len"),),
    ),
    Mistake(
        name="residuals_without_dropout",
        why="DecoderLayer builds its ResidualConnections without handing on its dropout.",
        diagnosis=("the residual connections of DecoderLayer never drop: hand dropout on, "
                   "ResidualConnection(d_model, dropout)."),
        edits=(("self.residual1 = ResidualConnection(d_model, dropout)\n"
                "        self.residual2 = ResidualConnection(d_model, dropout)\n"
                "        self.residual3 = ResidualConnection(d_model, dropout)",
                "self.residual1 = ResidualConnection(d_model)\n"
                "        self.residual2 = ResidualConnection(d_model)\n"
                "        self.residual3 = ResidualConnection(d_model)"),),
    ),
    Mistake(
        name="memory_dropped",
        why="Drops the encoder's memory before cross-attention, so keys and values lose features.",
        diagnosis=("dropout acts on the memory before cross-attention: pass memory as it comes, "
                   "self.cross_attn(y, memory, memory, src_mask); the residual drops cross-attention's output."),
        edits=(("self.cross_attn(y, memory, memory, src_mask)",
                "self.cross_attn(y, self.residual2.dropout(memory), self.residual2.dropout(memory), src_mask)"),),
    ),
    Mistake(
        name="feed_forward_output_dropped_twice",
        why="Drops the feed-forward's output inside residual3's sublayer as well as in residual3 itself.",
        diagnosis=("the feed-forward's output is dropped twice: ResidualConnection already drops its sublayer's "
                   "output, so write self.residual3(x, self.feed_forward)."),
        edits=(("return self.residual3(x, self.feed_forward)",
                "return self.residual3(x, lambda y: self.residual3.dropout(self.feed_forward(y)))"),),
    ),
    Mistake(
        name="decoder_drops_memory",
        why="Decoder gets a dropout of its own and drops the memory before the layers read it.",
        diagnosis=("the Decoder drops the memory before its layers: pass memory to every layer as it comes; the "
                   "dropouts belong inside the layers' parts."),
        edits=(
            ("        self.norm = nn.LayerNorm(d_model)\n",
             "        self.norm = nn.LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)\n"),
            ("        for layer in self.layers:\n",
             "        memory = self.dropout(memory)\n        for layer in self.layers:\n"),
        ),
    ),
)
