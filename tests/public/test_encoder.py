"""Public tests for exercises/encoder.py: names and shapes, masks, the final norm, and a known answer.

Run them with `grader check encoder`. They need no reference solution: the expected names come from
the exercise's docstrings, the properties hold for any weights, and the known answer silences the
attention (wo = 0) so that the layer is x plus the feed-forward of norm(x), computed here by hand.
"""

import pytest
import torch
import torch.nn.functional as F

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
    tolerance,
    tr,
)

D_MODEL, N_HEADS, D_FF = 16, 4, 32
LAYER = ("x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask)); "
         "return self.residual2(x, self.feed_forward)")


def layer_parameters(prefix=""):
    """The names and shapes of an EncoderLayer's parameters, as the docstring asks for them."""
    shapes = {f"self_attn.{w}.weight": [D_MODEL, D_MODEL] for w in ("wq", "wk", "wv", "wo")}
    shapes |= {"feed_forward.w1.weight": [D_FF, D_MODEL], "feed_forward.w1.bias": [D_FF],
               "feed_forward.w2.weight": [D_MODEL, D_FF], "feed_forward.w2.bias": [D_MODEL]}
    for i in (1, 2):
        shapes |= {f"residual{i}.norm.weight": [D_MODEL], f"residual{i}.norm.bias": [D_MODEL]}
    return {prefix + name: shape for name, shape in shapes.items()}


def run(module, *args, what="Encoder", **kwargs):
    try:
        return expect_tensor(module(*args, **kwargs), name=tr("{what} output", what=what))
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(LAYER + ".")) from None


def encoder(impl, device, n_layers=2):
    return impl.encoder.Encoder(n_layers, D_MODEL, N_HEADS, D_FF).to(device).eval()


@pytest.mark.confirmed_by("test_layer_with_silent_attention_adds_the_feed_forward_of_norm_x")
@pytest.mark.points(1)
def test_encoder_layer_has_the_contract_sublayers(impl):
    layer = impl.encoder.EncoderLayer(D_MODEL, N_HEADS, D_FF)
    expect_parameters(layer, layer_parameters(), "EncoderLayer(16, 4, 32)",
                      hint="self_attn = MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout)), "
                      "feed_forward = FeedForward(d_model, d_ff, dropout), residual1 and residual2 = "
                      "ResidualConnection(d_model, dropout).")
    info = describe(layer)
    assert "self_attn.mask" not in info.buffers, tr(
        "EncoderLayer.self_attn has a causal mask: the encoder sees the whole source, so build it with "
        "is_causal=False.")


@pytest.mark.confirmed_by("test_layer_with_silent_attention_adds_the_feed_forward_of_norm_x")
@pytest.mark.points(2)
def test_encoder_has_its_own_weights_in_every_layer_and_a_final_norm(impl):
    expected = layer_parameters("layers.0.") | layer_parameters("layers.1.") | layer_parameters("layers.2.")
    expected |= {"norm.weight": [D_MODEL], "norm.bias": [D_MODEL]}
    m = impl.encoder.Encoder(3, D_MODEL, N_HEADS, D_FF)
    got = describe(m).parameters
    if any(name.startswith("layers.0.") for name in got) and not any(name.startswith("layers.1.") for name in got):
        raise AssertionError(
            tr("Encoder(3, ...) has parameters for layers.0 only: its three layers are one and the same object, "
               "sharing one set of weights.")
            + hint_suffix(tr("[EncoderLayer(...)] * n_layers repeats one layer; build a new one for each: "
                             "nn.ModuleList(EncoderLayer(...) for _ in range(n_layers))."))
        )
    expect_parameters(m, expected, "Encoder(3, 16, 4, 32)",
                      hint="layers = nn.ModuleList of n_layers EncoderLayers, norm = nn.LayerNorm(d_model).")


@pytest.mark.points(1)
def test_output_has_the_shape_of_the_input(impl, device, seed):
    m = encoder(impl, device)
    for shape in ((2, 7, D_MODEL), (1, 5, D_MODEL)):
        out = run(m, torch.randn(*shape, device=device))
        assert tuple(out.shape) == shape, tr(
            "Encoder output has shape {shape} for an input of shape {input_shape}; expected the same (B, T, d_model).",
            shape=tuple(out.shape), input_shape=shape)


@pytest.mark.points(2)
def test_layer_with_silent_attention_adds_the_feed_forward_of_norm_x(impl, device, seed):
    layer = impl.encoder.EncoderLayer(D_MODEL, N_HEADS, D_FF).to(device).eval()
    weights = {name: torch.randn(*shape, device=device) / 4 for name, shape in layer_parameters().items()}
    weights["self_attn.wo.weight"] = torch.zeros(D_MODEL, D_MODEL, device=device)  # attention adds exactly 0
    for i in (1, 2):
        weights[f"residual{i}.norm.weight"] += 1
    load_parameters(layer, weights, name="EncoderLayer", names_hint=tr("use the names of the docstring"))
    x = torch.randn(2, 7, D_MODEL, device=device)

    def by_hand(x):
        w = {name: t.to(x.dtype) for name, t in weights.items()}
        y = F.layer_norm(x, (D_MODEL,), w["residual2.norm.weight"], w["residual2.norm.bias"])
        hidden = F.relu(F.linear(y, w["feed_forward.w1.weight"], w["feed_forward.w1.bias"]))
        return x + F.linear(hidden, w["feed_forward.w2.weight"], w["feed_forward.w2.bias"])

    want = by_hand(x.double())
    assert_close(run(layer, x, what="EncoderLayer"), want.float(), atol=tolerance(by_hand(x), want),
                 name="EncoderLayer output with wo = 0",
                 hint=tr("with wo = 0 the attention adds nothing, so the layer returns x + feed_forward(norm2(x)), "
                         "where norm2 is residual2's own LayerNorm: {layer}.", layer=LAYER))


@pytest.mark.points(1)
def test_final_norm_normalises_every_position(impl, device, seed):
    out = run(encoder(impl, device), 3 * torch.randn(2, 7, D_MODEL, device=device) + 2)
    mean, var = out.mean(dim=-1), out.var(dim=-1, unbiased=False)
    assert_close(mean, torch.zeros(2, 7, device=device), atol=1e-4, name="mean over d_model of the Encoder output",
                 hint="with its initial weights (1 and 0) the final LayerNorm leaves every position with mean 0 and "
                      "variance 1: return self.norm(x) after the last layer.")
    assert_close(var, torch.ones(2, 7, device=device), atol=1e-3, name="variance over d_model of the Encoder output",
                 hint="apply self.norm (an nn.LayerNorm(d_model)) to the output of the last layer.")


@pytest.mark.points(1)
def test_every_position_sees_the_whole_source(impl, device, seed):
    m = encoder(impl, device)
    x = torch.randn(2, 7, D_MODEL, device=device)
    changed = x.clone()
    changed[:, -1] = torch.randn(2, D_MODEL, device=device)
    moved = (run(m, changed) - run(m, x))[:, 0].abs().max().item()
    assert moved > 1e-4, (
        tr("changing the last source token changed the output at position 0 by only {moved}: the encoder's "
           "self-attention should let every position look at the whole source, later positions included.",
           moved=format(moved, ".2g"))
        + hint_suffix(tr("self_attn is MultiHeadAttention(..., is_causal=False) and gets q, k and v from the same y."))
    )


@pytest.mark.points(2)
def test_padding_is_never_attended(impl, device, seed):
    m = encoder(impl, device, n_layers=2)
    x = torch.randn(2, 8, D_MODEL, device=device)
    lengths = [8, 5]
    mask = padding_mask(lengths, 8, device)
    changed = x.clone()
    changed[1, 5:] = torch.randn(3, D_MODEL, device=device)  # only the padding of batch element 1
    before, after = run(m, x, mask), run(m, changed, mask)
    assert_close(after[1, :5], before[1, :5], atol=1e-5, name="output at the real tokens of batch element 1",
                 hint="only its padding (positions 5 to 7, blocked by the mask) changed. Pass the mask to every "
                      "layer, and in each layer to self_attn: self.self_attn(y, y, y, mask).")


DROPOUT_HINT = N_("pass the dropout argument on to every part: MultiHeadAttention(ModelArgs(..., dropout=dropout)), "
                  "FeedForward(d_model, d_ff, dropout), ResidualConnection(d_model, dropout), and to each "
                  "EncoderLayer.")


@pytest.mark.points(1)
def test_every_dropout_drops_with_the_probability_it_was_given(impl, seed):
    m = impl.encoder.Encoder(2, D_MODEL, N_HEADS, D_FF, 0.3)
    try:
        expect_dropout("Encoder", m, 0.3, what="Encoder(..., dropout=0.3)", hint=DROPOUT_HINT)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(DROPOUT_HINT))) from None


# --- no dropout without the argument, and dropout only inside the parts ----------------------------

MODULES = {"EncoderLayer": (D_MODEL, N_HEADS, D_FF), "Encoder": (2, D_MODEL, N_HEADS, D_FF)}
PASS_DROPOUT = N_("pass the dropout argument on to every part: MultiHeadAttention(ModelArgs(dim=d_model, "
                  "n_heads=n_heads, dropout=dropout)), FeedForward(d_model, d_ff, dropout), "
                  "ResidualConnection(d_model, dropout), and to each EncoderLayer; the default is dropout=0.0")
COMPOSITION = N_("in EncoderLayer, x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask)), then "
                 "self.residual2(x, self.feed_forward); in Encoder, every layer in turn with the mask, then self.norm "
                 "once")


def built(impl, module, dropout):
    """The submission's EncoderLayer or Encoder of MODULES' sizes; dropout=None leaves it out (the default)."""
    return getattr(impl.encoder, module)(*MODULES[module], *(() if dropout is None else (dropout,)))


@pytest.mark.hint_after("test_layer_with_silent_attention_adds_the_feed_forward_of_norm_x")  # the plain case
@pytest.mark.points(1)
@pytest.mark.parametrize("dropout", [None, 0.0], ids=["default dropout", "dropout=0.0"])
@pytest.mark.parametrize("module", MODULES)
def test_without_dropout_training_mode_matches_eval_mode(impl, device, seed, module, dropout):
    m = built(impl, module, dropout).to(device)
    x = torch.randn(2, 7, D_MODEL, device=device)
    evaluated = run(m.eval(), x, what=module)
    label = (tr("{what} output in training mode, built without a dropout argument", what=module) if dropout is None
             else tr("{what} output in training mode, built with dropout=0.0", what=module))
    assert_close(run(m.train(), x, what=module), evaluated, atol=1e-5, name=label,
                 hint=tr("nothing may be dropped, even in training mode: {recipe}.", recipe=tr(PASS_DROPOUT)))


@pytest.mark.hint_after("test_layer_with_silent_attention_adds_the_feed_forward_of_norm_x")  # the plain case
@pytest.mark.points(1)
@pytest.mark.parametrize("module", MODULES)
def test_in_training_mode_it_is_its_parts_draw_for_draw(impl, seed, module):
    """Seeded alike in training mode, EncoderLayer(x, mask) must equal the contract's composition of its own parts,
    residual1(x, y -> self_attn(y, y, y, mask)) then residual2(., feed_forward), and Encoder its layers in turn
    then norm: every dropout draw is then a part's. A dropout of its own anywhere (on x, a query or key, the
    attention output, between layers) draws more, and the outputs part."""
    m = built(impl, module, 0.3).train()
    x, mask = torch.randn(3, 7, D_MODEL), padding_mask([7, 4, 2], 7, "cpu")
    impl.torch.manual_seed(0)
    whole = run(m, x, mask, what=module)
    impl.torch.manual_seed(0)
    if module == "EncoderLayer":
        composed = m.residual2(m.residual1(x, impl.probes.SelfAttending(m.self_attn, mask)), m.feed_forward)
    else:
        composed = x
        for i in range(MODULES[module][0]):
            composed = m.get_submodule(f"layers.{i}")(composed, mask)
        composed = m.norm(composed)
    assert_close(whole, expect_tensor(composed, name=tr("{module}'s parts composed", module=module)), atol=1e-5,
                 name=tr("{module}(..., dropout=0.3)(x, mask) in training mode, against its parts composed with the "
                         "same seed", module=module),
                 hint=tr("dropout belongs only inside the parts (MultiHeadAttention, FeedForward, ResidualConnection): "
                         "{recipe}, with nothing of the layer's or the encoder's own in between.",
                         recipe=tr(COMPOSITION)))
