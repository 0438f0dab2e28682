"""Hidden tests for exercises/decoder.py: structure, golden outputs, causality, cross-attention, masks, final norm.

The submission gets the reference's parameters by name (every LayerNorm drawn at random, so a norm
used twice or not at all shows; each module keeps its own causal `mask`), so any difference is in
the computation. Expected values are the float64 golden of the reference; each tolerance comes from
how far the float32 reference lands from it on the same inputs.
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
    random_keep_mask,
    randomise_norms,
    silenced,
    tolerance,
    tr,
)

D_MODEL, N_HEADS, D_FF, MAX_SEQ_LEN = 16, 4, 32, 12
T_TGT, T_SRC = 8, 6
LAYER = N_("in DecoderLayer, x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask)), then "
           "x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask)), then "
           "self.residual3(x, self.feed_forward); in Decoder, every layer in turn, then self.norm once")
OUTPUT = N_("Decoder output")


def layer_hint():
    """LAYER as a hint of its own, a sentence."""
    return tr("{recipe}.", recipe=tr(LAYER))


def pair(impl, ref, device, *, n_layers=2, dropout=0.0):
    """The reference decoder (trusted) and the submission's, holding the same parameters, both in eval mode."""
    sizes = (n_layers, D_MODEL, N_HEADS, D_FF, dropout, MAX_SEQ_LEN)
    r = ref.decoder.Decoder(*sizes)
    randomise_norms(r)
    m = impl.decoder.Decoder(*sizes)
    weights = {name: p.detach() for name, p in r.named_parameters()}
    load_parameters(m, weights, name="Decoder",
                    names_hint="layers.<i>.self_attn, .cross_attn, .feed_forward, .residual1 to .residual3, norm")
    return m.to(device).eval(), r.to(device).eval()


def run(m, *args, hint=None):
    """m(*args), a tensor; `hint` (a sentence, English or already translated; LAYER's by default) closes the message
    of a failure."""
    try:
        return expect_tensor(m(*args), name=OUTPUT)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint) if hint else layer_hint())) from None


def check_golden(m, r, x, memory, src_mask=None, tgt_mask=None, *, name=OUTPUT, hint=None):
    want = golden(r, x, memory, src_mask, tgt_mask)
    atol = tolerance(r(x.float(), memory.float(), src_mask, tgt_mask), want)
    hint = tr(hint) if hint else layer_hint()
    out = run(m, x, memory, src_mask, tgt_mask, hint=hint)
    assert_close(out, want.to(x.dtype), atol=atol, name=name, hint=hint)


def inputs(device, batch=2, T_tgt=T_TGT, T_src=T_SRC):
    return torch.randn(batch, T_tgt, D_MODEL, device=device), torch.randn(batch, T_src, D_MODEL, device=device)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_parameters_have_the_contract_names_and_shapes(impl, ref):
    sizes = (2, 24, 3, 40, 0.1, 10)
    got = {name: p["shape"] for name, p in describe(impl.decoder.Decoder(*sizes)).parameters.items()}
    expected = {name: list(p.shape) for name, p in ref.decoder.Decoder(*sizes).named_parameters()}
    problems = parameter_problems(got, expected)
    assert not problems, (
        tr("Decoder(2, d_model=24, n_heads=3, d_ff=40) has {problems}.", problems=problems)
        + hint_suffix(tr("layers = nn.ModuleList of DecoderLayer, each with self_attn, cross_attn "
                         "(MultiHeadAttention), feed_forward (FeedForward), residual1 to residual3 "
                         "(ResidualConnection); norm = nn.LayerNorm(d_model)."))
    )


@pytest.mark.confirmed_by(
    "test_future_target_tokens_do_not_leak",
    "test_cross_attention_reads_keys_and_values_from_memory",
)
@pytest.mark.points(1)
def test_self_attention_is_causal_and_cross_attention_is_not(impl):
    info = describe(impl.decoder.DecoderLayer(D_MODEL, N_HEADS, D_FF, 0.0, 10))
    for name in ("self_attn", "cross_attn"):
        assert info.is_a(name, "MultiHeadAttention"), (
            tr("DecoderLayer.{name} should be your MultiHeadAttention, got {kind}", name=name,
               kind=info.kind_of(name))
        )
    causal = "MultiHeadAttention(ModelArgs(..., max_seq_len=max_seq_len), is_causal=True)."  # code: every language's
    assert "self_attn.mask" in info.buffers, (
        tr("DecoderLayer.self_attn has no causal mask buffer: in training the whole target is fed in at once, and "
           "position t must not see the tokens after it.")
        + hint_suffix(causal)
    )
    shape = info.buffers["self_attn.mask"]["shape"]
    assert shape == [1, 1, 10, 10], (
        tr("DecoderLayer(..., max_seq_len=10).self_attn has causal mask of shape {shape}, expected [1, 1, 10, 10].",
           shape=shape)
        + hint_suffix(causal)
    )
    assert "cross_attn.mask" not in info.buffers, (
        tr("DecoderLayer.cross_attn has a causal mask: the whole source is known, so cross-attention is not causal.")
    )


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_layers_are_distinct_modules(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, n_layers=3)
    layers = sorted({name.split(".")[1] for name in describe(m).parameters if name.startswith("layers.")})
    assert layers == ["0", "1", "2"], (
        tr("Decoder(3, ...) has parameters for layers {layers} only: the others are the same object as an earlier "
           "layer, so all share one set of weights.", layers=layers)
        + hint_suffix(tr("[DecoderLayer(...)] * n_layers repeats one layer; build a new one for each: "
                         "nn.ModuleList(DecoderLayer(...) for _ in range(n_layers))."))
    )


# --- agreement with the golden -----------------------------------------------------------------


def keep(shape):
    """A random keep mask that always keeps target key 0, so no causal row is left with every key blocked."""

    def make(generator, device):
        mask = random_keep_mask(shape, generator=generator)
        mask[..., 0] = True
        return mask.to(device)

    return make


def pad(lengths, T):
    return lambda generator, device: padding_mask(lengths, T, device)


CASES = {  # n_layers, batch, T_tgt, T_src, src_mask, tgt_mask
    "1 layer": (1, 2, T_TGT, T_SRC, None, None),
    "2 layers": (2, 2, T_TGT, T_SRC, None, None),
    "3 layers": (3, 2, T_TGT, T_SRC, None, None),
    "3 layers, src_mask (B, 1, 1, T_src)": (3, 3, T_TGT, T_SRC, pad([6, 4, 2], T_SRC), None),
    "2 layers, tgt_mask (B, 1, 1, T_tgt)": (2, 2, T_TGT, T_SRC, None, keep((2, 1, 1, T_TGT))),
    "2 layers, both masks, T_tgt = max_seq_len": (
        2, 2, MAX_SEQ_LEN, 9, pad([9, 5], 9), keep((2, 1, MAX_SEQ_LEN, MAX_SEQ_LEN))),
    "batch of one": (2, 1, T_TGT, T_SRC, None, None),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("n_layers, batch, T_tgt, T_src, src_mask, tgt_mask", CASES.values(), ids=CASES.keys())
def test_matches_golden(impl, ref, device, seed, n_layers, batch, T_tgt, T_src, src_mask, tgt_mask):
    m, r = pair(impl, ref, device, n_layers=n_layers)
    x, memory = inputs(device, batch, T_tgt, T_src)
    generator = torch.Generator().manual_seed(seed)
    masks = [make(generator, device) if make else None for make in (src_mask, tgt_mask)]
    check_golden(m, r, x, memory, *masks)


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    m.to(torch.float64)
    x, memory = inputs(device)
    check_golden(m, r, x.double(), memory.double(), padding_mask([6, 4], T_SRC, device),
                 hint="in float64: look for a hard-coded float32 (.float(), dtype=torch.float32) or a tensor made "
                      "without x's dtype.")


# --- masks and what is read ----------------------------------------------------------------------


@pytest.mark.points(1)
def test_future_target_tokens_do_not_leak(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, n_layers=3)
    x, memory = inputs(device)
    before = run(m, x, memory)
    for t in (0, 3, 6):
        changed = x.clone()
        changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:])
        after = run(m, changed, memory)
        leak = (after[:, : t + 1] - before[:, : t + 1]).abs().amax(dim=(0, 2)) > 1e-5
        if bool(leak.any()):
            s = int(torch.nonzero(leak)[0])
            raise AssertionError(
                tr("Decoder output at position {s} changed when only target positions {first} to {last} changed: "
                   "in training the whole target is fed in at once, and position t must not see the tokens it is to "
                   "predict.", s=s, first=t + 1, last=T_TGT - 1)
                + hint_suffix(tr("a later target token reaches an earlier position only through attention: "
                                 "self_attn must be causal (MultiHeadAttention(..., is_causal=True)), and cross_attn "
                                 "reads its keys and values from memory, not the target."))
            )


@pytest.mark.points(1)
def test_cross_attention_reads_keys_and_values_from_memory(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    x, memory = inputs(device)
    moved = (run(m, x, torch.randn_like(memory)) - run(m, x, memory)).abs().amax(dim=(0, 2))
    assert bool((moved > 1e-4).all()), (
        tr("changing memory moved the Decoder output at position {t} by only {moved}: cross-attention should take "
           "its keys and values from memory.", t=int(moved.argmin()), moved=format(moved.min().item(), ".2g"))
        + hint_suffix(tr("self.cross_attn(y, memory, memory, src_mask), queries from the decoder's y."))
    )
    check_golden(m, r, x, memory)


@pytest.mark.hint_after("test_matches_golden[2 layers]")  # the same, with a mask: its hint is about the mask
@pytest.mark.points(1)
def test_source_positions_blocked_by_src_mask_change_nothing(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, n_layers=2)
    x, memory = inputs(device, batch=3)
    src_mask = padding_mask([T_SRC, 4, 2], T_SRC, device)
    changed = memory.clone()
    changed[1, 4:], changed[2, 2:] = torch.randn(2, D_MODEL, device=device), torch.randn(4, D_MODEL, device=device)
    assert_close(run(m, x, changed, src_mask), run(m, x, memory, src_mask), atol=1e-5,
                 name="Decoder output after changing only source positions blocked by src_mask",
                 hint="pass src_mask to every layer and in every layer to cross_attn: "
                      "self.cross_attn(y, memory, memory, src_mask).")


@pytest.mark.hint_after("test_matches_golden[2 layers]")  # the same, with a mask: its hint is about the mask
@pytest.mark.points(1)
def test_tgt_mask_is_honoured_on_top_of_the_causal_mask(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, n_layers=2)
    x, memory = inputs(device)
    tgt_mask = torch.ones(2, 1, 1, T_TGT, dtype=torch.bool, device=device)
    tgt_mask[0, ..., 2], tgt_mask[1, ..., 4] = False, False  # one blocked target key per batch element
    changed = x.clone()
    changed[0, 2], changed[1, 4] = torch.randn(D_MODEL, device=device), torch.randn(D_MODEL, device=device)
    before, after = run(m, x, memory, None, tgt_mask), run(m, changed, memory, None, tgt_mask)
    hint = tr("tgt_mask blocks that position as a key, so only its own output may change. Pass tgt_mask to every "
              "layer and in every layer to self_attn, on top of its causal mask: self.self_attn(y, y, y, tgt_mask).")
    assert_close(after[0, 3:], before[0, 3:], atol=1e-5, name="output of batch element 0 at positions 3 and later",
                 hint=tr("only target position 2 changed; {why}", why=hint))
    assert_close(after[1, 5:], before[1, 5:], atol=1e-5, name="output of batch element 1 at positions 5 and later",
                 hint=tr("only target position 4 changed; {why}", why=hint))


@pytest.mark.points(1)
def test_final_norm_is_applied_after_the_last_layer(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    with torch.no_grad():
        r.norm.weight.fill_(2.0)
        r.norm.bias.fill_(0.5)
    m.load_state_dict({"norm.weight": r.norm.weight.detach(), "norm.bias": r.norm.bias.detach()}, strict=False)
    x, memory = inputs(device)
    normalised = (run(m, 3 * x + 1, memory) - 0.5) / 2.0  # undoes the final norm's weight 2 and bias 0.5
    hint = N_("the last operation of Decoder.forward is self.norm (nn.LayerNorm(d_model)), after every layer.")
    assert_close(normalised.mean(-1), torch.zeros(2, T_TGT, device=device), atol=1e-4,
                 name="mean over d_model of (output - norm.bias) / norm.weight", hint=hint)
    assert_close(normalised.var(-1, unbiased=False), torch.ones(2, T_TGT, device=device), atol=1e-3,
                 name="variance over d_model of (output - norm.bias) / norm.weight", hint=hint)


# --- gradients and dropout -------------------------------------------------------------------------


@pytest.mark.points(1)
def test_every_parameter_and_the_memory_get_the_golden_gradient(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    x, memory = inputs(device)
    src_mask = padding_mask([T_SRC, 4], T_SRC, device)
    grad_output = torch.randn(2, T_TGT, D_MODEL, device=device)

    def leaves(dtype):  # fresh leaf tensors for each run, so no gradient is shared between them
        return x.to(dtype).clone().requires_grad_(True), memory.to(dtype).clone().requires_grad_(True), src_mask

    with float64(r):
        golden_grads = backward(r, *leaves(torch.float64), grad_output=grad_output.double())
    ref32 = backward(r, *leaves(torch.float32), grad_output=grad_output)
    try:
        got = backward(m, *leaves(torch.float32), grad_output=grad_output)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(layer_hint())) from None
    absent = [name for name in golden_grads.parameters if name not in got.parameters]
    assert not absent, (
        tr("Decoder has no parameter {names} to take a gradient: every layer needs its own weights, "
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
    for i, what in enumerate(("x", "memory")):
        grad = got.inputs[i] if len(got.inputs) > i else None
        assert grad is not None, tr("no gradient reached the input {name}: do not detach it", name=what)
        assert_close(grad, golden_grads.inputs[i].float(), atol=tolerance(ref32.inputs[i], golden_grads.inputs[i]),
                     name=tr("gradient of the input {name}", name=what))


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_dropout_only_in_training_mode(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dropout=0.5)
    x, memory = inputs(device)
    check_golden(m, r, x, memory, name="Decoder output in eval mode (dropout=0.5)",
                 hint="in eval mode every dropout is off: pass dropout on to the sublayers and let their "
                      "nn.Dropout modules switch themselves off, no F.dropout(..., training=True).")
    m.train()
    assert not torch.equal(run(m, x, memory), run(m, x, memory)), (
        tr("Decoder(dropout=0.5) in training mode gave the same output twice: pass dropout on to self_attn, "
           "cross_attn, feed_forward and the residual connections.")
    )


# --- defaults, and dropout's probability in every part ---------------------------------------------

MODULES = {"DecoderLayer": (D_MODEL, N_HEADS, D_FF), "Decoder": (2, D_MODEL, N_HEADS, D_FF)}
PASS_DROPOUT = N_("pass the dropout argument on to every part: both MultiHeadAttention(ModelArgs(..., "
                  "dropout=dropout, max_seq_len=max_seq_len), ...), FeedForward(d_model, d_ff, dropout), each "
                  "ResidualConnection(d_model, dropout), and to each DecoderLayer; the defaults are dropout=0.0, "
                  "max_seq_len=512")
SIZES = N_("the defaults are dropout=0.0 and max_seq_len=512, and both are handed on: each attention's causal mask "
           "is (1, 1, max_seq_len, max_seq_len), from MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, "
           "dropout=dropout, max_seq_len=max_seq_len), ...), and each DecoderLayer gets the Decoder's max_seq_len.")


def built(lib, module, dropout):
    """lib's DecoderLayer or Decoder of MODULES' sizes; dropout=None leaves dropout and max_seq_len out."""
    return getattr(lib.decoder, module)(*MODULES[module], *(() if dropout is None else (dropout, MAX_SEQ_LEN)))


@pytest.mark.points(1)
@pytest.mark.parametrize("module", MODULES)
def test_every_dropout_drops_with_the_probability_it_was_given(impl, seed, module):
    m = built(impl, module, 0.3)
    what = f"{module}({', '.join(map(str, MODULES[module]))}, dropout=0.3, max_seq_len={MAX_SEQ_LEN})"
    pass_dropout = tr("{recipe}.", recipe=tr(PASS_DROPOUT))
    try:
        expect_dropout(module, m, 0.3, what=what, hint=pass_dropout)
        expect_dropout(module, m, 0.3, what=what, training=False,
                       hint="in eval mode every dropout is off: use nn.Dropout modules, not F.dropout(..., "
                            "training=True).")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(pass_dropout)) from None


NAMES = N_("self_attn, cross_attn, feed_forward, residual1 to residual3 (and layers.<i>, norm in Decoder)")


def stream_inputs(x):
    return (x, torch.randn(4, 6, D_MODEL))


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


BRANCHES = {"self_attn": 2, "cross_attn": 2, "feed_forward": 1}  # attention's dropout after wo, the residual's


@pytest.mark.points(1)
@pytest.mark.parametrize("live", BRANCHES)
def test_each_sublayer_output_is_dropped_by_its_residual_once(impl, ref, seed, live):
    """With the other sublayers silenced, every norm giving ones and memory of ones, what the layer outputs for
    x = 0 is the live sublayer's output, one value per head (or position) kept or dropped feature by feature:
    once by the residual's dropout (and once more by attention's after wo). A second dropout of the layer's
    own drops more; a dropout on the memory makes a head's features differ."""
    p = 0.3
    m = built(impl, "DecoderLayer", p)
    weights = branch_weights(dict(built(ref, "DecoderLayer", p).named_parameters()), live)
    load_parameters(m, weights, name="DecoderLayer", names_hint=tr(NAMES))
    out = run(m.train(), torch.zeros(64, 8, D_MODEL), torch.ones(64, 6, D_MODEL))
    expect_branch_dropped(out, groups=1 if live == "feed_forward" else N_HEADS, p=p, chained=BRANCHES[live],
                          what=tr("DecoderLayer(..., dropout={p}) in training mode, {live}'s contribution", p=p,
                                  live=live),
                          hint="each sublayer's output is dropped once, by its ResidualConnection: "
                               "self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask)), self.residual2(x, "
                               "lambda y: self.cross_attn(y, memory, memory, src_mask)), self.residual3(x, "
                               "self.feed_forward), with no dropout of the layer's own, and memory as it comes.")


