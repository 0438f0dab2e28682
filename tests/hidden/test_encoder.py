"""Hidden tests for exercises/encoder.py: structure, distinct layers, golden outputs, the mask, the final norm.

The submission gets the reference's parameters by name (every LayerNorm drawn at random, so a norm
used twice or not at all shows), so any difference is in the computation. Expected values are the
float64 golden of the reference; each tolerance comes from how far the float32 reference lands from
it on the same inputs.
"""

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    branch_weights,
    describe,
    expect_branch_dropped,
    expect_dropout,
    expect_tensor,
    float64,
    golden,
    hint_suffix,
    load_parameters,
    padding_mask,
    parameter_problems,
    randomise_norms,
    silenced,
    tolerance,
    tr,
)

D_MODEL, N_HEADS, D_FF = 16, 4, 32
LAYER = N_("in EncoderLayer, x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask)), then "
           "self.residual2(x, self.feed_forward); in Encoder, every layer in turn with the mask, then self.norm once")
OUTPUT = N_("Encoder output")


def layer_hint():
    """LAYER as a hint of its own, a sentence."""
    return tr("{recipe}.", recipe=tr(LAYER))


def pair(impl, ref, device, *, n_layers=2, dropout=0.0):
    """The reference encoder (trusted) and the submission's, holding the same parameters, both in eval mode."""
    r = ref.encoder.Encoder(n_layers, D_MODEL, N_HEADS, D_FF, dropout)
    randomise_norms(r)
    m = impl.encoder.Encoder(n_layers, D_MODEL, N_HEADS, D_FF, dropout)
    weights = {name: p.detach() for name, p in r.named_parameters()}
    load_parameters(m, weights, name="Encoder",
                    names_hint="layers.<i>.self_attn, .feed_forward, .residual1, .residual2, norm")
    return m.to(device).eval(), r.to(device).eval()


def run(m, *args, hint=None):
    """m(*args), a tensor; `hint` (a sentence, English or already translated; LAYER's by default) closes the message
    of a failure."""
    try:
        return expect_tensor(m(*args), name=OUTPUT)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint) if hint else layer_hint())) from None


def check_golden(m, r, x, mask=None, *, name=OUTPUT, hint=None):
    want = golden(r, x, mask)
    atol = tolerance(r(x.float(), mask), want)
    hint = tr(hint) if hint else layer_hint()
    assert_close(run(m, x, mask, hint=hint), want.to(x.dtype), atol=atol, name=name, hint=hint)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_parameters_have_the_contract_names_and_shapes(impl, ref):
    sizes = (2, 24, 3, 40, 0.1)
    got = {name: p["shape"] for name, p in describe(impl.encoder.Encoder(*sizes)).parameters.items()}
    expected = {name: list(p.shape) for name, p in ref.encoder.Encoder(*sizes).named_parameters()}
    problems = parameter_problems(got, expected)
    assert not problems, (
        tr("Encoder(2, d_model=24, n_heads=3, d_ff=40) has {problems}.", problems=problems)
        + hint_suffix(tr("layers = nn.ModuleList of EncoderLayer, each with self_attn (MultiHeadAttention), "
                         "feed_forward (FeedForward), residual1 and residual2 (ResidualConnection); "
                         "norm = nn.LayerNorm(d_model)."))
    )


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_self_attention_is_not_causal(impl):
    info = describe(impl.encoder.EncoderLayer(D_MODEL, N_HEADS, D_FF))
    assert info.is_a("self_attn", "MultiHeadAttention"), (
        tr("EncoderLayer.self_attn should be your MultiHeadAttention, got {kind}", kind=info.kind_of("self_attn"))
    )
    assert "self_attn.mask" not in info.buffers, (
        tr("EncoderLayer.self_attn has a causal mask buffer: the source is known entirely, so the encoder attends "
           "both ways.")
        + hint_suffix("MultiHeadAttention(ModelArgs(...), is_causal=False).")  # code only: the same in every language
    )


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_layers_are_distinct_modules(impl, ref, device, seed):
    m, r = pair(impl, ref, device, n_layers=3)
    info = describe(m)
    layers = sorted({name.split(".")[1] for name in info.parameters if name.startswith("layers.")})
    assert layers == ["0", "1", "2"], (
        tr("Encoder(3, ...) has parameters for layers {layers} only: the others are the same object as an earlier "
           "layer, so all share one set of weights.", layers=layers)
        + hint_suffix(tr("[EncoderLayer(...)] * n_layers repeats one layer; build a new one for each: "
                         "nn.ModuleList(EncoderLayer(...) for _ in range(n_layers))."))
    )
    got = describe(m.get_submodule("layers.1")).parameters
    assert set(got) == set(dict(r.layers[1].named_parameters())), (
        tr("layers.1 has parameters {names}...: each layer should be an EncoderLayer.", names=sorted(got)[:4])
    )


# --- agreement with the golden -----------------------------------------------------------------

CASES = {  # n_layers, lengths (padding) or None, batch
    "1 layer": (1, None, 2),
    "2 layers": (2, None, 2),
    "3 layers": (3, None, 2),
    "3 layers, padding mask (B, 1, 1, T)": (3, [9, 6, 4], 3),
    "batch of one": (2, None, 1),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("n_layers, lengths, batch", CASES.values(), ids=CASES.keys())
def test_matches_golden(impl, ref, device, seed, n_layers, lengths, batch):
    m, r = pair(impl, ref, device, n_layers=n_layers)
    x = torch.randn(batch, 9, D_MODEL, device=device)
    check_golden(m, r, x, padding_mask(lengths, 9, device) if lengths else None)


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    m.to(torch.float64)
    x = torch.randn(2, 7, D_MODEL, device=device, dtype=torch.float64)
    check_golden(m, r, x, padding_mask([7, 5], 7, device),
                 hint="in float64: look for a hard-coded float32 (.float(), dtype=torch.float32) or a tensor made "
                      "without x's dtype.")


@pytest.mark.points(1)
def test_masked_source_tokens_change_nothing(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, n_layers=3)
    x = torch.randn(3, 9, D_MODEL, device=device)
    mask = padding_mask([9, 6, 4], 9, device)
    changed = x.clone()
    changed[1, 6:], changed[2, 4:] = torch.randn(3, D_MODEL, device=device), torch.randn(5, D_MODEL, device=device)
    before, after = run(m, x, mask), run(m, changed, mask)
    hint = tr("pass the mask to every layer and in every layer to self_attn: self.self_attn(y, y, y, mask)")
    assert_close(after[1, :6], before[1, :6], atol=1e-5, name="output at the real tokens of batch element 1",
                 hint=tr("only its padding (positions 6 to 8, blocked by the mask) changed: {recipe}.", recipe=hint))
    assert_close(after[2, :4], before[2, :4], atol=1e-5, name="output at the real tokens of batch element 2",
                 hint=tr("only its padding (positions 4 to 8) changed: {recipe}.", recipe=hint))


@pytest.mark.points(1)
def test_final_norm_is_applied_after_the_last_layer(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    with torch.no_grad():
        r.norm.weight.fill_(2.0)
        r.norm.bias.fill_(0.5)
    m.load_state_dict({"norm.weight": r.norm.weight.detach(), "norm.bias": r.norm.bias.detach()}, strict=False)
    x = 3 * torch.randn(2, 7, D_MODEL, device=device) + 1
    normalised = (run(m, x) - 0.5) / 2.0  # undoes the final norm's weight 2 and bias 0.5
    hint = N_("the last operation of Encoder.forward is self.norm (nn.LayerNorm(d_model)), after every layer.")
    assert_close(normalised.mean(-1), torch.zeros(2, 7, device=device), atol=1e-4,
                 name="mean over d_model of (output - norm.bias) / norm.weight", hint=hint)
    assert_close(normalised.var(-1, unbiased=False), torch.ones(2, 7, device=device), atol=1e-3,
                 name="variance over d_model of (output - norm.bias) / norm.weight", hint=hint)
    check_golden(m, r, x)


@pytest.mark.points(1)
def test_every_parameter_gets_the_golden_gradient(impl, ref, device, seed):
    m, r = pair(impl, ref, device, n_layers=2)
    x = torch.randn(2, 7, D_MODEL, device=device)
    mask = padding_mask([7, 5], 7, device)
    grad_output = torch.randn(2, 7, D_MODEL, device=device)
    with float64(r):
        golden_grads = backward(r, x.double().requires_grad_(True), mask, grad_output=grad_output.double())
    ref32 = backward(r, x.clone().requires_grad_(True), mask, grad_output=grad_output)
    try:
        got = backward(m, x.clone().requires_grad_(True), mask, grad_output=grad_output)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(layer_hint())) from None
    absent = [name for name in golden_grads.parameters if name not in got.parameters]
    assert not absent, (
        tr("Encoder has no parameter {names} to take a gradient: every layer needs its own weights, "
           "a new layer object for each.", names=absent[:3])
    )
    unused = [name for name in golden_grads.parameters if got.parameters[name] is None]
    assert not unused, (
        tr("no gradient reached {names}: that part of the module is never used in forward.", names=unused[:3])
        + hint_suffix(tr("{recipe}; each residual connection wraps its own sublayer.", recipe=tr(LAYER)))
    )
    for name, want in golden_grads.parameters.items():
        assert_close(got.parameters[name], want.float(), atol=tolerance(ref32.parameters[name], want),
                     name=tr("gradient of {name}", name=name),
                     hint=tr("the gradients follow the forward pass: {recipe}.", recipe=tr(LAYER)))
    assert got.inputs and got.inputs[0] is not None, (
        tr("no gradient reached the input {name}: do not detach it", name="x")
    )
    assert_close(got.inputs[0], golden_grads.inputs[0].float(), atol=tolerance(ref32.inputs[0], golden_grads.inputs[0]),
                 name=tr("gradient of the input {name}", name="x"))


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_dropout_only_in_training_mode(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dropout=0.5)
    x = torch.randn(2, 7, D_MODEL, device=device)
    check_golden(m, r, x, name="Encoder output in eval mode (dropout=0.5)",
                 hint="in eval mode every dropout is off: pass dropout on to the sublayers and let their "
                      "nn.Dropout modules switch themselves off, no F.dropout(..., training=True).")
    m.train()
    assert not torch.equal(run(m, x), run(m, x)), (
        tr("Encoder(dropout=0.5) in training mode gave the same output twice: pass dropout on to self_attn, "
           "feed_forward and the residual connections.")
    )


# --- the default dropout, and dropout's probability in every part ----------------------------------

MODULES = {"EncoderLayer": (D_MODEL, N_HEADS, D_FF), "Encoder": (2, D_MODEL, N_HEADS, D_FF)}
PASS_DROPOUT = N_("pass the dropout argument on to every part: MultiHeadAttention(ModelArgs(dim=d_model, "
                  "n_heads=n_heads, dropout=dropout)), FeedForward(d_model, d_ff, dropout), "
                  "ResidualConnection(d_model, dropout), and to each EncoderLayer; the default is dropout=0.0")


def built(lib, module, dropout):
    """lib's EncoderLayer or Encoder of MODULES' sizes; dropout=None leaves it out (the default)."""
    return getattr(lib.encoder, module)(*MODULES[module], *(() if dropout is None else (dropout,)))


@pytest.mark.points(1)
@pytest.mark.parametrize("module", MODULES)
def test_every_dropout_drops_with_the_probability_it_was_given(impl, seed, module):
    m = built(impl, module, 0.3)
    what = f"{module}({', '.join(map(str, MODULES[module]))}, dropout=0.3)"
    pass_dropout = tr("{recipe}.", recipe=tr(PASS_DROPOUT))
    try:
        expect_dropout(module, m, 0.3, what=what, hint=pass_dropout)
        expect_dropout(module, m, 0.3, what=what, training=False,
                       hint="in eval mode every dropout is off: use nn.Dropout modules, not F.dropout(..., "
                            "training=True).")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(pass_dropout)) from None


NAMES = N_("self_attn, feed_forward, residual1, residual2 (and layers.<i>, norm in Encoder)")


def stream_inputs(x):
    return (x,)


@pytest.mark.points(1)
@pytest.mark.parametrize("module", MODULES)
def test_dropout_never_touches_the_residual_stream(impl, ref, seed, module):
    """With every sublayer's output projection at zero, each dropout acts on zeros: the output is the same in
    training mode, call after call, as in eval mode. A dropout on x itself (a layer's output, the stream
    between layers, after the norm) makes it random."""
    r = built(ref, module, 0.5)
    weights = silenced(r)
    m = built(impl, module, 0.5)
    load_parameters(m, weights, name=module, names_hint=tr(NAMES))
    x = torch.randn(4, 7, D_MODEL)
    m.train()
    first, second = run(m, *stream_inputs(x)), run(m, *stream_inputs(x))
    m.eval()
    evaluated = run(m, *stream_inputs(x))
    assert torch.equal(first, second) and torch.allclose(first, evaluated, atol=1e-5), (
        tr("{module}(..., dropout=0.5) in training mode, with every sublayer silenced (wo and w2 set to zero), "
           "still gave random outputs: something drops the residual stream itself. Dropout belongs only inside the "
           "parts: on the attention weights, after wo, in the feed-forward, and on each sublayer's output in the "
           "residual connection, never on x, a layer's output or the final norm's.", module=module)
    )


BRANCHES = {"self_attn": 2, "feed_forward": 1}  # dropouts after each sublayer: MHA's after wo, then the residual's


@pytest.mark.points(1)
@pytest.mark.parametrize("live", BRANCHES)
def test_each_sublayer_output_is_dropped_by_its_residual_once(impl, ref, seed, live):
    """With the other sublayer silenced and every norm giving ones, what the layer outputs for x = 0 is the live
    sublayer's output, one value per head (or position) kept or dropped feature by feature: once by the residual's
    dropout (and once more by attention's after wo), never by a second dropout of its own."""
    p = 0.3
    m = built(impl, "EncoderLayer", p)
    weights = branch_weights(dict(built(ref, "EncoderLayer", p).named_parameters()), live)
    load_parameters(m, weights, name="EncoderLayer", names_hint=tr(NAMES))
    out = run(m.train(), torch.zeros(64, 8, D_MODEL))
    expect_branch_dropped(out, groups=N_HEADS if live == "self_attn" else 1, p=p, chained=BRANCHES[live],
                          what=tr("EncoderLayer(..., dropout={p}) in training mode, {live}'s contribution", p=p,
                                  live=live),
                          hint="each sublayer's output is dropped once, by its ResidualConnection: "
                               "self.residual1(x, lambda y: self.self_attn(y, y, y, mask)), then "
                               "self.residual2(x, self.feed_forward), with no dropout of the layer's own.")


