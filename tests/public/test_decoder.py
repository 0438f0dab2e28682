"""Public tests for exercises/decoder.py: names and shapes, causality, what cross-attention reads, a known answer.

Run them with `grader check decoder`. They need no reference solution: the expected names come from
the exercise's docstrings, the masks' effects hold for any weights, and the known answer silences
every sublayer but cross-attention, whose scores are all 0: each target position then adds the mean
of the kept memory positions to itself.
"""

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_dropout,
    expect_parameters,
    expect_tensor,
    hint_suffix,
    load_parameters,
    padding_mask,
    tr,
)

D_MODEL, N_HEADS, D_FF, MAX_SEQ_LEN = 16, 4, 32, 12
T_TGT, T_SRC = 8, 6
CAUSAL_SELF_ATTN = N_("self_attn = MultiHeadAttention(ModelArgs(..., max_seq_len=max_seq_len), is_causal=True).")
LAYER = ("1. x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask)); "
         "2. x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask)); "
         "3. return self.residual3(x, self.feed_forward)")


def layer_parameters(prefix=""):
    """The names and shapes of a DecoderLayer's parameters, as the docstring asks for them."""
    shapes = {f"{attn}.{w}.weight": [D_MODEL, D_MODEL] for attn in ("self_attn", "cross_attn")
              for w in ("wq", "wk", "wv", "wo")}
    shapes |= {"feed_forward.w1.weight": [D_FF, D_MODEL], "feed_forward.w1.bias": [D_FF],
               "feed_forward.w2.weight": [D_MODEL, D_FF], "feed_forward.w2.bias": [D_MODEL]}
    for i in (1, 2, 3):
        shapes |= {f"residual{i}.norm.weight": [D_MODEL], f"residual{i}.norm.bias": [D_MODEL]}
    return {prefix + name: shape for name, shape in shapes.items()}


def run(module, *args, what="Decoder", **kwargs):
    try:
        return expect_tensor(module(*args, **kwargs), name=tr("{what} output", what=what))
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(LAYER + ".")) from None


def decoder(impl, device, n_layers=2):
    return impl.decoder.Decoder(n_layers, D_MODEL, N_HEADS, D_FF, max_seq_len=MAX_SEQ_LEN).to(device).eval()


def inputs(device, batch=2):
    return torch.randn(batch, T_TGT, D_MODEL, device=device), torch.randn(batch, T_SRC, D_MODEL, device=device)


@pytest.mark.confirmed_by("test_layer_with_uniform_cross_attention_adds_the_mean_of_kept_memory")
@pytest.mark.points(1)
def test_decoder_layer_has_the_contract_sublayers(impl):
    layer = impl.decoder.DecoderLayer(D_MODEL, N_HEADS, D_FF, max_seq_len=MAX_SEQ_LEN)
    expect_parameters(layer, layer_parameters(), "DecoderLayer(16, 4, 32)",
                      hint="self_attn and cross_attn = MultiHeadAttention(ModelArgs(...)), feed_forward = FeedForward, "
                      "residual1, residual2, residual3 = ResidualConnection.")
    buffers = describe(layer).buffers
    assert "self_attn.mask" in buffers, (
        tr("DecoderLayer.self_attn has no causal mask buffer: the decoder must not see the target tokens it is to "
           "predict.") + hint_suffix(tr(CAUSAL_SELF_ATTN))
    )
    shape = buffers["self_attn.mask"]["shape"]
    assert shape == [1, 1, MAX_SEQ_LEN, MAX_SEQ_LEN], (
        tr("{layer}.self_attn has causal mask of shape {shape}, expected {expected}.",
           layer=f"DecoderLayer(..., max_seq_len={MAX_SEQ_LEN})", shape=shape,
           expected=[1, 1, MAX_SEQ_LEN, MAX_SEQ_LEN])
        + hint_suffix(tr(CAUSAL_SELF_ATTN))
    )
    assert "cross_attn.mask" not in buffers, tr(
        "DecoderLayer.cross_attn has a causal mask: the source is known entirely, so build it with is_causal=False.")


@pytest.mark.confirmed_by("test_layer_with_uniform_cross_attention_adds_the_mean_of_kept_memory")
@pytest.mark.points(1)
def test_decoder_has_its_own_weights_in_every_layer_and_a_final_norm(impl):
    expected = layer_parameters("layers.0.") | layer_parameters("layers.1.") | layer_parameters("layers.2.")
    expected |= {"norm.weight": [D_MODEL], "norm.bias": [D_MODEL]}
    m = impl.decoder.Decoder(3, D_MODEL, N_HEADS, D_FF, max_seq_len=MAX_SEQ_LEN)
    got = describe(m).parameters
    if any(name.startswith("layers.0.") for name in got) and not any(name.startswith("layers.1.") for name in got):
        raise AssertionError(
            tr("Decoder(3, ...) has parameters for layers.0 only: its three layers are one and the same object, "
               "sharing one set of weights.")
            + hint_suffix(tr("[DecoderLayer(...)] * n_layers repeats one layer; build a new one for each."))
        )
    expect_parameters(m, expected, "Decoder(3, 16, 4, 32)",
                      hint="layers = nn.ModuleList of n_layers DecoderLayers, norm = nn.LayerNorm(d_model).")


@pytest.mark.points(1)
def test_output_has_the_shape_of_the_target(impl, device, seed):
    x, memory = inputs(device)
    out = run(decoder(impl, device), x, memory)
    assert tuple(out.shape) == (2, T_TGT, D_MODEL), tr(
        "Decoder output has shape {shape} for a target {target} and a memory {memory}; expected {expected}, the "
        "target's shape: the queries come from x.", shape=tuple(out.shape), target=(2, T_TGT, D_MODEL),
        memory=(2, T_SRC, D_MODEL), expected=(2, T_TGT, D_MODEL))


@pytest.mark.points(2)
def test_future_target_tokens_do_not_leak(impl, device, seed):
    m = decoder(impl, device)
    x, memory = inputs(device)
    before = run(m, x, memory)
    for t in (0, 4):
        changed = x.clone()
        changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:])
        after = run(m, changed, memory)
        leak = (after[:, : t + 1] - before[:, : t + 1]).abs().amax(dim=(0, 2)) > 1e-5
        if bool(leak.any()):
            s = int(torch.nonzero(leak)[0])
            raise AssertionError(
                tr("Decoder output at position {s} changed when only target positions {first} to {last} changed: the "
                   "decoder peeks at tokens it must predict.", s=s, first=t + 1, last=T_TGT - 1)
                + hint_suffix(tr("a later target token reaches an earlier position only through attention: self_attn "
                                 "must be causal (MultiHeadAttention(..., is_causal=True)), and cross_attn reads its "
                                 "keys and values from memory, not the target."))
            )


@pytest.mark.points(1)
def test_memory_is_read_at_every_position(impl, device, seed):
    m = decoder(impl, device)
    x, memory = inputs(device)
    moved = (run(m, x, torch.randn_like(memory)) - run(m, x, memory)).abs().amax(dim=(0, 2))
    assert bool((moved > 1e-4).all()), (
        tr("changing memory moved the Decoder output at position {t} by only {moved}: cross-attention should read "
           "keys and values from memory.", t=int(moved.argmin()), moved=format(moved.min().item(), ".2g"))
        + hint_suffix(tr("self.cross_attn(y, memory, memory, src_mask), with y the normalised decoder input."))
    )


@pytest.mark.points(1)
def test_masked_source_positions_are_never_read(impl, device, seed):
    m = decoder(impl, device)
    x, memory = inputs(device)
    src_mask = padding_mask([T_SRC, 3], T_SRC, device)
    changed = memory.clone()
    changed[1, 3:] = torch.randn(T_SRC - 3, D_MODEL, device=device)  # only memory blocked by src_mask
    assert_close(run(m, x, changed, src_mask), run(m, x, memory, src_mask), atol=1e-5,
                 name="Decoder output after changing only source positions blocked by src_mask",
                 hint="pass src_mask to every layer and in every layer to cross_attn: "
                      "self.cross_attn(y, memory, memory, src_mask).")


@pytest.mark.points(1)
def test_tgt_mask_blocks_target_padding(impl, device, seed):
    m = decoder(impl, device)
    x, memory = inputs(device)
    tgt_mask = torch.ones(2, 1, 1, T_TGT, dtype=torch.bool, device=device)
    tgt_mask[:, ..., 2] = False  # target position 2 is blocked as a key, e.g. a padding token
    changed = x.clone()
    changed[:, 2] = torch.randn(2, D_MODEL, device=device)
    before, after = run(m, x, memory, tgt_mask=tgt_mask), run(m, changed, memory, tgt_mask=tgt_mask)
    assert_close(after[:, 3:], before[:, 3:], atol=1e-5, name="Decoder output at positions 3 and later",
                 hint="only target position 2 changed, and tgt_mask blocks it as a key, so no later position may "
                      "read it: tgt_mask is an extra keep mask for self-attention, on top of the causal one, "
                      "self.self_attn(y, y, y, tgt_mask), and cross-attention reads memory, not the target.")


@pytest.mark.points(1)
def test_final_norm_normalises_every_position(impl, device, seed):
    x, memory = inputs(device)
    out = run(decoder(impl, device), 3 * x + 2, memory)
    mean, var = out.mean(dim=-1), out.var(dim=-1, unbiased=False)
    hint = N_("with its initial weights (1 and 0) the final LayerNorm leaves every position with mean 0 and "
              "variance 1: return self.norm(x) after the last layer.")
    assert_close(mean, torch.zeros(2, T_TGT, device=device), atol=1e-4, name="mean over d_model of the output",
                 hint=hint)
    assert_close(var, torch.ones(2, T_TGT, device=device), atol=1e-3, name="variance over d_model of the output",
                 hint=hint)


@pytest.mark.points(2)
def test_layer_with_uniform_cross_attention_adds_the_mean_of_kept_memory(impl, device, seed):
    layer = impl.decoder.DecoderLayer(D_MODEL, N_HEADS, D_FF, max_seq_len=MAX_SEQ_LEN).to(device).eval()
    weights = {name: torch.randn(*shape, device=device) / 4 for name, shape in layer_parameters().items()}
    eye, zero = torch.eye(D_MODEL, device=device), torch.zeros(D_MODEL, D_MODEL, device=device)
    weights |= {
        "self_attn.wo.weight": zero,  # self-attention adds 0
        "cross_attn.wq.weight": zero,  # every score 0: equal weights on the kept memory positions
        "cross_attn.wv.weight": eye, "cross_attn.wo.weight": eye,  # the values are memory itself
        "feed_forward.w2.weight": torch.zeros(D_MODEL, D_FF, device=device),  # the feed-forward adds 0
        "feed_forward.w2.bias": torch.zeros(D_MODEL, device=device),
    }
    load_parameters(layer, weights, name="DecoderLayer", names_hint=tr("use the names of the docstring"))
    x, memory = inputs(device)
    src_mask = padding_mask([T_SRC, 4], T_SRC, device)
    expected = x + torch.stack([memory[0].mean(0), memory[1, :4].mean(0)])[:, None, :]
    assert_close(run(layer, x, memory, src_mask, what="DecoderLayer"), expected, atol=1e-5,
                 name="DecoderLayer output with only cross-attention left, all its scores 0 and wv = wo = I",
                 hint=tr("each target position should add the mean of the memory positions that src_mask keeps: "
                         "keys and values come from memory itself (not normalised, not from x). {layer}.",
                         layer=LAYER))


DROPOUT_HINT = N_("pass the dropout argument on to every part: both MultiHeadAttention(ModelArgs(..., "
                  "dropout=dropout, ...)), FeedForward(d_model, d_ff, dropout), each ResidualConnection(d_model, "
                  "dropout), and to each DecoderLayer.")


@pytest.mark.points(1)
def test_every_dropout_drops_with_the_probability_it_was_given(impl, seed):
    m = impl.decoder.Decoder(2, D_MODEL, N_HEADS, D_FF, 0.3, MAX_SEQ_LEN)
    try:
        expect_dropout("Decoder", m, 0.3, what="Decoder(..., dropout=0.3)", hint=DROPOUT_HINT)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(DROPOUT_HINT))) from None


# --- no dropout without the argument, and dropout only inside the parts ----------------------------

MODULES = {"DecoderLayer": (D_MODEL, N_HEADS, D_FF), "Decoder": (2, D_MODEL, N_HEADS, D_FF)}
PASS_DROPOUT = N_("pass the dropout argument on to every part: both MultiHeadAttention(ModelArgs(..., "
                  "dropout=dropout, max_seq_len=max_seq_len), ...), FeedForward(d_model, d_ff, dropout), each "
                  "ResidualConnection(d_model, dropout), and to each DecoderLayer; the defaults are dropout=0.0, "
                  "max_seq_len=512")
SIZES = N_("the defaults are dropout=0.0 and max_seq_len=512, and both are handed on: each attention's causal mask "
           "is (1, 1, max_seq_len, max_seq_len), from MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, "
           "dropout=dropout, max_seq_len=max_seq_len), ...), and each DecoderLayer gets the Decoder's max_seq_len.")
COMPOSITION = N_("in DecoderLayer, x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask)), then "
                 "x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask)), then "
                 "self.residual3(x, self.feed_forward); in Decoder, every layer in turn, then self.norm once")
DEFAULT_MAX_SEQ_LEN = 512


def built(impl, module, dropout):
    """The submission's DecoderLayer or Decoder of MODULES' sizes; dropout=None leaves dropout and max_seq_len out."""
    return getattr(impl.decoder, module)(*MODULES[module], *(() if dropout is None else (dropout, MAX_SEQ_LEN)))


@pytest.mark.hint_after("test_layer_with_uniform_cross_attention_adds_the_mean_of_kept_memory")  # the plain case
@pytest.mark.points(1)
@pytest.mark.parametrize("dropout", [None, 0.0], ids=["defaults", "dropout=0.0"])
@pytest.mark.parametrize("module", MODULES)
def test_without_dropout_training_mode_matches_eval_mode(impl, device, seed, module, dropout):
    m = built(impl, module, dropout).to(device)
    size = DEFAULT_MAX_SEQ_LEN if dropout is None else MAX_SEQ_LEN
    for name, buffer in describe(m).buffers.items():
        if name.endswith("self_attn.mask") and buffer["shape"] != [1, 1, size, size]:
            layer = module if name == "self_attn.mask" else f"{module}.{name.removesuffix('.self_attn.mask')}"
            raise AssertionError(tr("{layer}.self_attn has causal mask of shape {shape}, expected {expected}.",
                                    layer=layer, shape=buffer["shape"], expected=[1, 1, size, size])
                                 + hint_suffix(tr(SIZES)))
    if dropout is None:
        label = tr("{what} output in training mode, built without dropout and max_seq_len", what=module)
    else:
        label = tr("{what} output in training mode, built with dropout=0.0", what=module)
    x, memory = inputs(device)
    evaluated = run(m.eval(), x, memory, what=module)
    assert_close(run(m.train(), x, memory, what=module), evaluated, atol=1e-5, name=label,
                 hint=tr("nothing may be dropped, even in training mode: {recipe}.", recipe=tr(PASS_DROPOUT)))


@pytest.mark.hint_after("test_layer_with_uniform_cross_attention_adds_the_mean_of_kept_memory")  # the plain case
@pytest.mark.points(1)
@pytest.mark.parametrize("module", MODULES)
def test_in_training_mode_it_is_its_parts_draw_for_draw(impl, seed, module):
    """Seeded alike in training mode, DecoderLayer(x, memory, src_mask, tgt_mask) must equal the contract's
    composition of its own parts (residual1 with self_attn(y, y, y, tgt_mask), residual2 with cross_attn(y,
    memory, memory, src_mask), residual3 with feed_forward), and Decoder its layers in turn then norm: every
    dropout draw is then a part's. A dropout of its own anywhere (on x, the memory, a query, a sublayer's output,
    between layers) draws more, and the outputs part."""
    m = built(impl, module, 0.3).train()
    (x, memory), src_mask, tgt_mask = inputs("cpu", batch=3), padding_mask([T_SRC, 3, 1], T_SRC, "cpu"), None
    impl.torch.manual_seed(0)
    whole = run(m, x, memory, src_mask, tgt_mask, what=module)
    impl.torch.manual_seed(0)
    if module == "DecoderLayer":
        composed = m.residual1(x, impl.probes.SelfAttending(m.self_attn, tgt_mask))
        composed = m.residual2(composed, impl.probes.CrossAttending(m.cross_attn, memory, src_mask))
        composed = m.residual3(composed, m.feed_forward)
    else:
        composed = x
        for i in range(MODULES[module][0]):
            composed = m.get_submodule(f"layers.{i}")(composed, memory, src_mask, tgt_mask)
        composed = m.norm(composed)
    assert_close(whole, expect_tensor(composed, name=tr("{module}'s parts composed", module=module)), atol=1e-5,
                 name=tr("{module}(..., dropout=0.3)(x, memory, src_mask) in training mode, against its parts "
                         "composed with the same seed", module=module),
                 hint=tr("dropout belongs only inside the parts (MultiHeadAttention, FeedForward, ResidualConnection): "
                         "{recipe}, with nothing of the layer's or the decoder's own in between, memory as it comes.",
                         recipe=tr(COMPOSITION)))
