"""Public tests for exercises/transformer.py: names and shapes, the embedding scale, the logits, greedy decoding.

Run them with `grader check transformer`. They need no reference solution: with the output projection
of every attention and feed-forward sublayer set to 0, each layer passes its input through unchanged,
so encode and decode reduce to LayerNorm(embedding * sqrt(d_model) + pe), computed here by hand (plus the
feed-forward's bias once per layer where that bias is drawn: a LayerNorm hides a scale, a bias shows it).
(PYTEST_DONT_REWRITE: the messages below are the whole feedback.)
"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_dropout,
    expect_tensor,
    hint_suffix,
    load_parameters,
    only_match,
    tr,
)

SRC_VOCAB, TGT_VOCAB, D_MODEL, N_HEADS, N_LAYERS, D_FF, MAX_SEQ_LEN = 11, 13, 32, 4, 2, 64, 24
START = 1
SCALE = math.sqrt(D_MODEL)


def transformer(impl, device, seed=0, *, n_layers=N_LAYERS):
    impl.torch.manual_seed(seed)  # the worker's own generator: the same weights on every run
    m = impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=n_layers,
                                     d_ff=D_FF, dropout=0.0, max_seq_len=MAX_SEQ_LEN)
    return m.to(device).eval()


def sinusoids(max_len, d_model):
    """The contract's positional table (1, max_len, d_model)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(1, max_len, d_model).float()


def load(m, weights):
    load_parameters(m, weights, name="Transformer", partial=True,
                    names_hint=tr("src_embed, tgt_embed, pos (its buffer pe), encoder, decoder, generator, and "
                                  "inside them the names of the earlier exercises (layers.0.self_attn.wo, "
                                  "layers.0.feed_forward.w2, ...)"))


def pass_through_weights(device, shift=None):
    """Every sublayer's output projection 0 (each layer passes x through, or adds `shift`, the feed-forward's bias
    w2.bias, where given), a known table pe, random embeddings."""
    zero = {}
    for i in range(N_LAYERS):
        for side, attentions in (("encoder", ("self_attn",)), ("decoder", ("self_attn", "cross_attn"))):
            for attention in attentions:
                zero[f"{side}.layers.{i}.{attention}.wo.weight"] = torch.zeros(D_MODEL, D_MODEL)
            zero[f"{side}.layers.{i}.feed_forward.w2.weight"] = torch.zeros(D_MODEL, D_FF)
            zero[f"{side}.layers.{i}.feed_forward.w2.bias"] = torch.zeros(D_MODEL) if shift is None else shift
    for side in ("encoder", "decoder"):
        zero[f"{side}.norm.weight"], zero[f"{side}.norm.bias"] = torch.ones(D_MODEL), torch.zeros(D_MODEL)
    zero["pos.pe"] = sinusoids(MAX_SEQ_LEN, D_MODEL)
    zero["src_embed.weight"] = torch.randn(SRC_VOCAB, D_MODEL) / math.sqrt(D_MODEL)  # std 1/sqrt(d_model)
    zero["tgt_embed.weight"] = torch.randn(TGT_VOCAB, D_MODEL) / math.sqrt(D_MODEL)
    zero["generator.weight"], zero["generator.bias"] = torch.randn(TGT_VOCAB, D_MODEL), torch.randn(TGT_VOCAB)
    return {name: value.to(device) for name, value in zero.items()}


def by_hand(weights, embed, tokens, scale=SCALE, positions=True, after=1.0):
    """LayerNorm((embed[tokens] * scale + pe[:, :T]) * after + the sum of the layers' w2.bias): encode or decode
    when every layer passes x through (and adds its feed-forward's bias)."""
    x = weights[f"{embed}.weight"][tokens] * scale
    if positions:
        x = x + weights["pos.pe"][:, : tokens.size(1)]
    side = "encoder" if embed == "src_embed" else "decoder"
    shift = sum(weights[f"{side}.layers.{i}.feed_forward.w2.bias"] for i in range(N_LAYERS))
    return F.layer_norm(x * after + shift, (D_MODEL,))



def decoding_by_hand(weights, device, scale=SCALE, positions=True):
    """What greedy_decode(m, src, 8) gives with pass-through layers: position t sees only its own token, so the next
    token is argmax generator(LN(embed * scale + pe[t]))."""
    ys = [START]
    for _ in range(7):
        row = by_hand(weights, "tgt_embed", torch.tensor([ys], device=device), scale=scale, positions=positions)[0, -1]
        ys.append(int((weights["generator.weight"] @ row + weights["generator.bias"]).argmax()))
    return ys

# --- structure and shapes ----------------------------------------------------------------------


@pytest.mark.confirmed_by(
    "test_embeddings_are_scaled_by_sqrt_d_model_and_positions_added",
    "test_logits_are_the_generator_of_the_decoder_output",
)
@pytest.mark.points(2)
def test_modules_have_the_contract_names_and_shapes(impl, device):
    info = describe(transformer(impl, device))
    got = {name: p["shape"] for name, p in info.parameters.items()
           if name.split(".")[0] in ("src_embed", "tgt_embed", "generator")}
    expected = {"src_embed.weight": [SRC_VOCAB, D_MODEL], "tgt_embed.weight": [TGT_VOCAB, D_MODEL],
                "generator.weight": [TGT_VOCAB, D_MODEL], "generator.bias": [TGT_VOCAB]}
    assert got == expected, (
        tr("{model} has embedding and generator parameters {got}, expected {expected}.",
           model=f"Transformer({SRC_VOCAB}, {TGT_VOCAB}, d_model={D_MODEL})", got=got, expected=expected)
        + hint_suffix(tr("src_embed = nn.Embedding(src_vocab, d_model), tgt_embed = nn.Embedding(tgt_vocab, "
                         "d_model), generator = nn.Linear(d_model, tgt_vocab)."))
    )
    for name, kind in (("src_embed", "Embedding"), ("tgt_embed", "Embedding"), ("pos", "PositionalEncoding"),
                       ("encoder", "Encoder"), ("decoder", "Decoder"), ("generator", "Linear")):
        assert info.is_a(name, kind), tr("{module} should be a {kind}, got {found}", module=f"Transformer.{name}",
                                         kind=kind, found=info.kind_of(name))
    pe = info.buffers.get("pos.pe", {}).get("shape")
    assert pe == [1, MAX_SEQ_LEN, D_MODEL], (
        tr("pos.pe has shape {shape}, expected [1, max_seq_len, d_model] = {expected}.", shape=pe,
           expected=[1, MAX_SEQ_LEN, D_MODEL])
        + hint_suffix(tr("pos = PositionalEncoding(d_model, max_seq_len, dropout)."))
    )
    for side in ("encoder", "decoder"):
        layers = sorted({name.split(".")[2] for name in info.parameters if name.startswith(f"{side}.layers.")})
        assert len(layers) == N_LAYERS, tr("{side} has {count} layers for n_layers={n_layers}", side=side,
                                           count=len(layers), n_layers=N_LAYERS)


@pytest.mark.points(1)
def test_encode_decode_and_logits_have_the_right_shapes(impl, device, seed):
    m = transformer(impl, device, seed)
    src = torch.randint(0, SRC_VOCAB, (2, 7), device=device)
    tgt = torch.randint(0, TGT_VOCAB, (2, 5), device=device)
    memory = expect_tensor(m.encode(src), name="encode(src)")
    assert tuple(memory.shape) == (2, 7, D_MODEL), tr(
        "encode(src) with src of shape (2, 7) returned shape {shape}, expected {expected}",
        shape=tuple(memory.shape), expected=(2, 7, D_MODEL))
    out = expect_tensor(m.decode(memory, tgt), name="decode(memory, tgt)")
    assert tuple(out.shape) == (2, 5, D_MODEL), tr(
        "decode(memory, tgt) with tgt of shape (2, 5) returned shape {shape}, expected {expected}: the decoder's "
        "output, before the generator", shape=tuple(out.shape), expected=(2, 5, D_MODEL))
    logits = expect_tensor(m(src, tgt), name="Transformer output")
    assert tuple(logits.shape) == (2, 5, TGT_VOCAB), (
        tr("Transformer(src (2, 7), tgt (2, 5)) returned shape {shape}, expected {expected} = (B, T_tgt, tgt_vocab).",
           shape=tuple(logits.shape), expected=(2, 5, TGT_VOCAB))
        + hint_suffix(tr("return self.generator(self.decode(self.encode(src), tgt))."))
    )


# --- the embedding scale, the positions, the logits --------------------------------------------

DECODE = "test_embeddings_are_scaled_by_sqrt_d_model_and_positions_added[decode]"
LOGITS = "test_logits_are_the_generator_of_the_decoder_output"

CAUSES = {  # (scale, positions added, scale after the positions) -> what the output matches instead
    (SCALE, True, 1.0): "",
    (1.0, True, 1.0): N_("It matches the output when the embeddings are not multiplied by sqrt(d_model)."),
    (float(D_MODEL), True, 1.0): N_("It matches the output when the embeddings are multiplied by d_model instead of "
                                    "sqrt(d_model)."),
    (SCALE, False, 1.0): N_("It matches the output when the positional encoding is not added."),
    (1.0, True, SCALE): N_("It matches the output when the embeddings are multiplied by sqrt(d_model) after the "
                           "positions are added, not before."),
}


def diagnose(out, weights, embed, tokens):
    """The cause the output matches, where it matches that one alone (claims.only_match)."""
    cause = only_match(out, {cause: by_hand(weights, embed, tokens, *cause) for cause in CAUSES}, atol=1e-4)
    return " " + tr(CAUSES[cause]) if cause is not None and CAUSES[cause] else ""


@pytest.mark.points(1)
@pytest.mark.parametrize("side", ["encode", "decode"])
def test_embeddings_are_scaled_by_sqrt_d_model_and_positions_added(impl, device, seed, side):
    m = transformer(impl, device)
    weights = pass_through_weights(device, shift=torch.randn(D_MODEL) / 2)  # shows a scale the LayerNorm hides
    load(m, weights)
    src = torch.randint(0, SRC_VOCAB, (2, 7), device=device)
    tgt = torch.randint(0, TGT_VOCAB, (2, 5), device=device)
    if side == "encode":
        out, embed, tokens = expect_tensor(m.encode(src), name="encode(src)"), "src_embed", src
    else:
        memory = torch.randn(2, 7, D_MODEL, device=device)
        out, embed, tokens = expect_tensor(m.decode(memory, tgt), name="decode(memory, tgt)"), "tgt_embed", tgt
    hint = tr("with every sublayer's output set to 0 but the feed-forward's bias b, each layer adds b, so {side} "
              "returns LayerNorm({embed}(tokens) * sqrt(d_model) + pe[:, :T] + n_layers * b): multiply by "
              "math.sqrt(self.d_model), then self.pos adds the positions, on both sides.", side=side, embed=embed)
    hint += diagnose(out, weights, embed, tokens)
    assert_close(out, by_hand(weights, embed, tokens), atol=1e-4,
                 name=tr("{side} with pass-through layers", side=side), hint=hint)


@pytest.mark.hint_after(DECODE)  # its hint assumes decode is right
@pytest.mark.points(1)
def test_logits_are_the_generator_of_the_decoder_output(impl, device, seed):
    m = transformer(impl, device)
    weights = pass_through_weights(device)
    load(m, weights)
    src = torch.randint(0, SRC_VOCAB, (2, 7), device=device)
    tgt = torch.randint(0, TGT_VOCAB, (2, 5), device=device)
    expected = by_hand(weights, "tgt_embed", tgt) @ weights["generator.weight"].T + weights["generator.bias"]
    logits = expect_tensor(m(src, tgt), name="Transformer output")
    hint = tr("forward returns self.generator(decode(encode(src), tgt)): raw scores (logits), without a softmax; "
              "with pass-through layers that is generator(LayerNorm(tgt_embed(tgt) * sqrt(d_model) + pe[:, :T])).")
    if logits.shape == expected.shape and torch.allclose(logits.sum(-1), torch.ones_like(logits.sum(-1)), atol=1e-4):
        hint += " " + tr("Yours sum to 1 over the vocabulary: cross-entropy and argmax take the logits themselves.")
    assert_close(logits, expected, atol=1e-4, name="logits with pass-through layers", hint=hint)


# --- greedy decoding ---------------------------------------------------------------------------


def greedy(impl, m, src, max_len, start=START):
    ys = expect_tensor(impl.transformer.greedy_decode(m, src, max_len, start), name="greedy_decode(...)")
    B = src.size(0)
    assert tuple(ys.shape) == (B, max_len), tr(
        "greedy_decode(model, src of shape {src_shape}, max_len={max_len}, start_symbol={start}) returned shape "
        "{shape}, expected {expected}: max_len tokens, the start symbol included, so max_len - 1 decoding steps.",
        src_shape=tuple(src.shape), max_len=max_len, start=start, shape=tuple(ys.shape), expected=(B, max_len))
    assert ys.dtype == torch.int64, tr("greedy_decode returned dtype {dtype}, expected torch.int64 (token ids)",
                                       dtype=ys.dtype)
    assert bool((ys[:, 0] == start).all()), (
        tr("greedy_decode's first column is {column}, expected start_symbol = {start} in every row.",
           column=ys[:, 0].tolist(), start=start)
        + hint_suffix(tr("start from ys = torch.full((B, 1), start_symbol, dtype=torch.long) and keep it."))
    )
    return ys


@pytest.mark.points(1)
def test_greedy_decode_returns_max_len_tokens_from_the_start_symbol(impl, device, seed):
    m = transformer(impl, device, seed)
    ys = greedy(impl, m, torch.randint(0, SRC_VOCAB, (3, 7), device=device), 9)
    assert bool(((ys >= 0) & (ys < TGT_VOCAB)).all()), (
        tr("greedy_decode returned tokens outside 0..{last}: {tokens}.", last=TGT_VOCAB - 1, tokens=ys.tolist())
        + hint_suffix(tr("append the argmax over the tgt_vocab logits of the last position."))
    )


@pytest.mark.points(1)
def test_greedy_decode_repeats_the_only_likely_token(impl, device, seed):
    m = transformer(impl, device)
    bias = torch.zeros(TGT_VOCAB, device=device)
    bias[5] = 10.0
    load(m, {"generator.weight": torch.zeros(TGT_VOCAB, D_MODEL, device=device), "generator.bias": bias})
    ys = greedy(impl, m, torch.randint(0, SRC_VOCAB, (2, 6), device=device), 5)
    expected = torch.tensor([[START, 5, 5, 5, 5]] * 2)
    assert torch.equal(ys.cpu(), expected), (
        tr("with a generator whose logits always favour token 5, greedy_decode returned {tokens}, expected "
           "{expected}.", tokens=ys.tolist(), expected=expected.tolist())
        + hint_suffix(tr("each step appends generator(out[:, -1]).argmax(dim=-1)."))
    )


@pytest.mark.hint_after(DECODE, LOGITS)  # its hint assumes decode and the generator are right
@pytest.mark.points(1)
def test_greedy_decode_matches_a_decoding_by_hand(impl, device, seed):
    m = transformer(impl, device)
    # Weights on which what this test is about shows: decoded by hand, they give more than one token after the start
    # symbol (a loop reading the first position's logits, out[:, 0], repeats one), and other tokens without the
    # positions or with the embeddings scaled otherwise.
    for _ in range(20):
        weights = pass_through_weights(device)
        expected = decoding_by_hand(weights, device)
        others = [decoding_by_hand(weights, device, positions=False), decoding_by_hand(weights, device, scale=1.0),
                  decoding_by_hand(weights, device, scale=D_MODEL)]
        if len(set(expected[1:])) > 1 and expected not in others:
            break
    load(m, weights)
    ys = greedy(impl, m, torch.randint(0, SRC_VOCAB, (2, 6), device=device), 8)
    assert ys.cpu().tolist() == [expected] * 2, (
        tr("with pass-through layers greedy_decode returned {tokens}, expected {expected}.", tokens=ys.cpu().tolist(),
           expected=[expected] * 2)
        + hint_suffix(tr("each step decodes all of ys (positions 0..t, so position t gets pe[t]) and appends the "
                         "argmax of the generator's logits at the LAST position, out[:, -1]."))
    )


@pytest.mark.hint_after(LOGITS)  # its hint assumes forward is generator(decode(...))
@pytest.mark.points(1)
def test_each_greedy_token_is_the_models_most_likely_next_token(impl, device, seed):
    m = transformer(impl, device, seed)
    src = torch.randint(0, SRC_VOCAB, (3, 7), device=device)
    ys = greedy(impl, m, src, 6)
    for t in range(1, ys.size(1)):
        logits = expect_tensor(m(src, ys[:, :t]), name="Transformer output")[:, -1]  # (B, tgt_vocab)
        chosen = logits.gather(-1, ys[:, t : t + 1].to(logits.device)).squeeze(-1)
        gap = logits.max(dim=-1).values - chosen
        if bool((gap > 1e-4).any()):
            b = int(torch.nonzero(gap > 1e-4)[0])
            raise AssertionError(
                tr("greedy_decode put token {token} at position {t} of row {b}, but after {prefix} the model's most "
                   "likely next token is {likely}.", token=int(ys[b, t]), t=t, b=b, prefix=ys[b, :t].tolist(),
                   likely=int(logits[b].argmax()))
                + hint_suffix(tr("decode all of ys so far and take the argmax of the logits of its LAST position, "
                                 "out[:, -1]."))
            )


@pytest.mark.points(1)
def test_every_dropout_drops_with_the_default_probability(impl, seed):
    hint = N_("the default is dropout=0.1; pass it on to every part: PositionalEncoding(d_model, max_seq_len, "
              "dropout), Encoder(..., dropout), Decoder(..., dropout, max_seq_len).")
    try:
        expect_dropout("Transformer", impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB), 0.1,
                       what=f"Transformer({SRC_VOCAB}, {TGT_VOCAB})", hint=hint)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


# --- the defaults, and dropout only inside the parts ------------------------------------------------

DEFAULTS = ("Transformer(src_vocab, tgt_vocab, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1, "
            "max_seq_len=512)")  # code: the same in every language


@pytest.mark.points(1)
def test_default_sizes_give_the_contract_structure(impl):
    info = describe(impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB))
    got = {name: p["shape"] for name, p in info.parameters.items()} | {
        name: b["shape"] for name, b in info.buffers.items()}
    d_model, d_ff, max_seq_len = 128, 512, 512
    expected = {"src_embed.weight": [SRC_VOCAB, d_model], "tgt_embed.weight": [TGT_VOCAB, d_model],
                "generator.weight": [TGT_VOCAB, d_model], "encoder.layers.0.feed_forward.w1.weight": [d_ff, d_model],
                "decoder.layers.0.feed_forward.w1.weight": [d_ff, d_model],
                "decoder.layers.0.self_attn.mask": [1, 1, max_seq_len, max_seq_len]}
    expected |= {f"{side}.layers.1.residual1.norm.weight": [d_model] for side in ("encoder", "decoder")}
    missing = [name for name in expected if name not in got]
    unexpected = [name for name in got if name.startswith(("encoder.layers.2.", "decoder.layers.2."))]  # n_layers=2
    shapes = [tr("{name} {shape} (expected {expected})", name=name, shape=got[name], expected=shape)
              for name, shape in expected.items() if got.get(name, shape) != shape]
    problems = [tr("no parameter {names}", names=missing[:3]) if missing else "",
                tr("unexpected parameter(s) {names}", names=unexpected[:3]) if unexpected else "",
                tr("wrong shapes: {shapes}", shapes="; ".join(shapes[:3])) if shapes else ""]
    assert not (missing or unexpected or shapes), (
        tr("{what} has {problems}.", what=f"Transformer({SRC_VOCAB}, {TGT_VOCAB})",
           problems=", ".join(problem for problem in problems if problem))
        + hint_suffix(tr("the defaults are {defaults}, each handed on to the parts.", defaults=DEFAULTS)))


def embedded(embed, ids):
    """What reaches pos: the embedding times sqrt(d_model), whether the embedding module scales inside or not."""
    looked_up = expect_tensor(embed(ids), name="the embedding of the tokens")
    table = expect_tensor(embed.weight, name="the embedding's weight")
    if looked_up.shape == (*ids.shape, D_MODEL) and torch.allclose(looked_up, table[ids] * math.sqrt(D_MODEL)):
        return looked_up
    return looked_up * math.sqrt(D_MODEL)


@pytest.mark.points(1)
@pytest.mark.parametrize("method", ["encode", "decode"])
def test_in_training_mode_encode_and_decode_are_their_parts_draw_for_draw(impl, seed, method):
    """Seeded alike in training mode, encode(src, src_mask) must equal encoder(pos(src_embed(src) * sqrt(d_model)),
    src_mask) of its own parts, and decode(memory, tgt, src_mask) decoder(pos(tgt_embed(tgt) * sqrt(d_model)),
    memory, src_mask): every dropout draw is then a part's. A dropout of its own (on the memory, the embeddings,
    encode's output) draws more, and the outputs part."""
    m = impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                                     d_ff=D_FF, dropout=0.3, max_seq_len=MAX_SEQ_LEN).train()
    src, tgt = torch.randint(0, SRC_VOCAB, (3, 7)), torch.randint(0, TGT_VOCAB, (3, 5))
    src_mask = (torch.arange(7) < torch.tensor([7, 5, 3])[:, None]).view(3, 1, 1, 7)  # padding: 7, 5 and 3 kept
    memory = torch.randn(3, 7, D_MODEL)
    if method == "encode":
        x = embedded(m.src_embed, src)
        impl.torch.manual_seed(0)
        whole = expect_tensor(m.encode(src, src_mask), name="encode(src, src_mask)")
        impl.torch.manual_seed(0)
        composed = m.encoder(m.pos(x), src_mask)
    else:
        y = embedded(m.tgt_embed, tgt)
        impl.torch.manual_seed(0)
        whole = expect_tensor(m.decode(memory, tgt, src_mask), name="decode(memory, tgt, src_mask)")
        impl.torch.manual_seed(0)
        composed = m.decoder(m.pos(y), memory, src_mask, None)
    assert_close(whole, expect_tensor(composed, name="its parts composed"), atol=1e-5,
                 name=tr("Transformer(..., dropout=0.3).{method} in training mode, against its parts composed with "
                         "the same seed", method=method),
                 hint="encode(src, src_mask) = self.encoder(self.pos(self.src_embed(src) * sqrt(d_model)), src_mask) "
                      "and decode(memory, tgt, src_mask, tgt_mask) = self.decoder(self.pos(self.tgt_embed(tgt) * "
                      "sqrt(d_model)), memory, src_mask, tgt_mask): dropout only inside the parts, memory as it comes.")
