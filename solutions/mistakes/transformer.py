"""Known mistakes in transformer.py, each as edits of solutions/transformer.py."""

from solutions.mistakes import Mistake

MISTAKES = (
    Mistake(
        name="decode_ignores_src_mask",
        why="decode never passes src_mask to the decoder: cross-attention reads padding.",
        diagnosis=("decode never passes src_mask to the decoder: hand it on, so cross-attention skips source "
                   "padding."),
        edits=(
            (
                "self.decoder(self.pos(y), memory, src_mask, tgt_mask)",
                "self.decoder(self.pos(y), memory, None, tgt_mask)",
            ),
        ),
    ),
    Mistake(
        name="decodes_the_source",
        why="forward feeds the source to the decoder instead of the target (training leaks the answer).",
        diagnosis="forward decodes the source instead of the target: decode(memory, tgt, src_mask, tgt_mask).",
        edits=(("self.decode(memory, tgt, src_mask, tgt_mask)", "self.decode(memory, src, src_mask, tgt_mask)"),),
    ),
    Mistake(
        name="embeddings_not_scaled",
        why="Embeddings not multiplied by sqrt(d_model), on either side.",
        diagnosis="the embeddings are not scaled: multiply them by sqrt(d_model) before adding the positions.",
        edits=(
            ("self.src_embed(src) * math.sqrt(self.d_model)", "self.src_embed(src)"),
            ("self.tgt_embed(tgt) * math.sqrt(self.d_model)", "self.tgt_embed(tgt)"),
        ),
    ),
    Mistake(
        name="greedy_drops_start_symbol",
        why="greedy_decode returns the generated tokens without the start symbol in front.",
        diagnosis="greedy_decode drops the start symbol: return it as column 0, followed by the generated tokens.",
        edits=(
            ("range(max_len - 1)", "range(max_len)"),
            ("    return ys\n", "    return ys[:, 1:]\n"),
        ),
    ),
    Mistake(
        name="greedy_first_position_logits",
        why="greedy_decode takes the argmax at the FIRST position each step, not the last.",
        diagnosis=("greedy_decode picks the next token from the first position's logits: use the last position, "
                   "logits[:, -1]."),
        edits=(("out[:, -1]", "out[:, 0]"),),
    ),
    Mistake(
        name="greedy_one_column_too_many",
        why="greedy_decode runs max_len steps and returns max_len + 1 columns.",
        diagnosis=("greedy_decode returns max_len + 1 columns: start with the start symbol and generate max_len -"
                   " 1 tokens."),
        edits=(("range(max_len - 1)", "range(max_len)"),),
    ),
    Mistake(
        name="no_positions_at_all",
        why="The positional encoding is never applied: the model cannot tell positions apart.",
        diagnosis="the positional encoding is never applied: pass both embeddings through self.pos.",
        edits=(
            ("self.encoder(self.pos(x), src_mask)", "self.encoder(x, src_mask)"),
            ("self.decoder(self.pos(y), memory", "self.decoder(y, memory"),
        ),
    ),
    Mistake(
        name="no_positions_on_target",
        why="The positional encoding is added to the source only, not to the target.",
        diagnosis="the target gets no positional encoding: pass the target embeddings through self.pos too.",
        edits=(("self.decoder(self.pos(y), memory", "self.decoder(y, memory"),),
    ),
    Mistake(
        name="scaled_by_d_model",
        why="Embeddings multiplied by d_model instead of sqrt(d_model).",
        diagnosis="the embeddings are multiplied by d_model: multiply by sqrt(d_model).",
        edits=(
            ("self.src_embed(src) * math.sqrt(self.d_model)", "self.src_embed(src) * self.d_model"),
            ("self.tgt_embed(tgt) * math.sqrt(self.d_model)", "self.tgt_embed(tgt) * self.d_model"),
        ),
    ),
    Mistake(
        name="softmax_before_returning_logits",
        why="forward returns softmax probabilities instead of raw logits.",
        diagnosis="forward returns probabilities: return the generator's raw logits, without a softmax.",
        edits=(
            (
                "self.generator(self.decode(memory, tgt, src_mask, tgt_mask))",
                "self.generator(self.decode(memory, tgt, src_mask, tgt_mask)).softmax(dim=-1)",
            ),
        ),
    ),
    Mistake(
        name="encoder_without_dropout",
        why="The Transformer builds its Encoder without handing on dropout, so the encoder never drops.",
        diagnosis=("the encoder of your Transformer never drops: hand dropout on, Encoder(n_layers, d_model, "
                   "n_heads, d_ff, dropout)."),
        edits=(("self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout)",
                "self.encoder = Encoder(n_layers, d_model, n_heads, d_ff)"),),
    ),
    Mistake(
        name="n_layers_default",
        why="The Transformer's n_layers defaults to 6 (the paper's) instead of the contract's 2.",
        diagnosis="Transformer built with the defaults has 6 layers per stack: the contract's default is n_layers=2.",
        edits=(("n_layers: int = 2,", "n_layers: int = 6,"),),
    ),
    Mistake(
        name="decode_drops_memory",
        why="decode passes pos's dropout of the memory to the decoder, so cross-attention reads dropped memory.",
        diagnosis=("decode drops the memory: pass it as it comes, self.decoder(self.pos(y), memory, src_mask, "
                   "tgt_mask); only the embeddings go through pos."),
        edits=(("return self.decoder(self.pos(y), memory, src_mask, tgt_mask)",
                "return self.decoder(self.pos(y), self.pos.dropout(memory), src_mask, tgt_mask)"),),
    ),
)
