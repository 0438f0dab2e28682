"""Hidden tests for exercises/sublayers.py: structure, agreement with a float64 golden, pre-norm, dropout.

The submission gets the reference's weights by name (its LayerNorm weights drawn at random, so that
a norm in the wrong place shows), so any difference is in the computation. The sublayers handed to
ResidualConnection are built in the worker: a module of the grader's probes, an nn.Linear, a plain
function. Expected values are float64 goldens of the reference; each tolerance comes from how far
the float32 reference lands from them.
"""

import copy

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    describe,
    expect_dropout,
    expect_tensor,
    golden,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
)

D_MODEL, D_FF = 16, 32
PRE_NORM = N_("return x + self.dropout(sublayer(self.norm(x))): normalise, apply the sublayer, drop, add x.")
FEED_FORWARD = "forward(x) = self.w2(self.dropout(torch.relu(self.w1(x))))"  # code: the same in every language


def load_reference(m, r, what):
    weights = {name: p.detach() for name, p in r.named_parameters()}
    load_parameters(m, weights, name=what, names_hint=tr("use the attribute names of the docstring"))


def feed_forward_pair(impl, ref, device, *, dropout=0.0):
    r = ref.sublayers.FeedForward(D_MODEL, D_FF, dropout)
    m = impl.sublayers.FeedForward(D_MODEL, D_FF, dropout)
    load_reference(m, r, "FeedForward")
    return m.to(device).eval(), r.to(device).eval()


def residual_pair(impl, ref, device, *, dropout=0.0):
    r = ref.sublayers.ResidualConnection(D_MODEL, dropout)
    with torch.no_grad():  # nn.LayerNorm starts as weight 1, bias 0: draw them so the norm's place shows
        r.norm.weight.copy_(1 + 0.5 * torch.randn(D_MODEL))
        r.norm.bias.copy_(0.5 * torch.randn(D_MODEL))
    m = impl.sublayers.ResidualConnection(D_MODEL, dropout)
    load_reference(m, r, "ResidualConnection")
    return m.to(device).eval(), r.to(device).eval()


def linear_pair(impl, device):
    """An nn.Linear(d_model, d_model) here and its twin with the same weights in the worker."""
    local = torch.nn.Linear(D_MODEL, D_MODEL).to(device)
    remote = impl.torch.nn.Linear(D_MODEL, D_MODEL).to(device)
    remote.load_state_dict({name: p.detach() for name, p in local.state_dict().items()})
    return remote, local


def run(module, *args, what, hint=""):
    """module(*args), a tensor; `hint` (English, or already translated) closes the message of a failure."""
    try:
        return expect_tensor(module(*args), name=tr("{what} output", what=what))
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def check_golden(m, r, x, *sublayer, what, name=None, hint=""):
    """m(x, *sublayer) against the float64 golden of r(x, *sublayer) (a local sublayer is copied to float64).

    `name` is the whole name of the output, translated ("{what} output" when not given)."""
    doubled = [copy.deepcopy(s).double() if isinstance(s, torch.nn.Module) else s for s in sublayer[1:]]
    want = golden(r, x, *doubled)
    atol = tolerance(r(x.float(), *sublayer[1:]), want)
    out = run(m, x, *sublayer[:1], what=what, hint=hint)
    assert_close(out, want.to(x.dtype), atol=atol, name=name or tr("{what} output", what=what), hint=hint)


# --- FeedForward ---------------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_feed_forward_matches_golden")
@pytest.mark.points(1)
def test_feed_forward_has_the_contract_layers(impl):
    info = describe(impl.sublayers.FeedForward(24, 40, 0.1))
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {"w1.weight": [40, 24], "w1.bias": [40], "w2.weight": [24, 40], "w2.bias": [24]}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module="FeedForward(24, 40)", got=got,
           expected=expected)
        + hint_suffix(tr("w1 = nn.Linear(d_model, d_ff), w2 = nn.Linear(d_ff, d_model), both with bias."))
    )
    for name in ("w1", "w2"):
        assert info.is_a(name, "Linear"), (
            tr("FeedForward.{name} should be an nn.Linear, got {kind}", name=name, kind=info.kind_of(name))
        )
    assert info.is_a("dropout", "Dropout"), (
        tr("FeedForward.dropout should be an nn.Dropout, got {kind}", kind=info.kind_of("dropout"))
    )


FEED_FORWARD_PLAIN = "test_feed_forward_matches_golden"
RESIDUAL_PLAIN = "test_residual_is_pre_norm_not_post_norm"
LINEAR_SUBLAYER = "test_any_callable_works_as_the_sublayer[nn.Linear built in the worker]"
PLAIN = {"FeedForward": FEED_FORWARD_PLAIN, "ResidualConnection": RESIDUAL_PLAIN}


def modules_after_their_plain_case():
    """Each module's case keeps its hint only where that module's plain golden case passes."""
    return [pytest.param(module, marks=pytest.mark.hint_after(PLAIN[module])) for module in PLAIN]


@pytest.mark.points(2)
@pytest.mark.parametrize("shape", [(2, 7, D_MODEL), (1, 3, D_MODEL), (3, 2, 5, D_MODEL)],
                         ids=["(B, T, d_model)", "batch of one", "two leading dims"])
def test_feed_forward_matches_golden(impl, ref, device, seed, shape):
    m, r = feed_forward_pair(impl, ref, device)
    x = torch.randn(*shape, device=device)
    check_golden(m, r, x, what="FeedForward",
                 hint=tr("{recipe}: the relu sits between w1 and w2.", recipe=FEED_FORWARD))


@pytest.mark.hint_after(FEED_FORWARD_PLAIN)  # the same, with a fixed dropout
@pytest.mark.points(1)
def test_feed_forward_dropout_acts_between_relu_and_w2(impl, ref, device, seed):
    m, r = feed_forward_pair(impl, ref, device)
    fixed = (torch.rand(2, 7, D_FF, device=device) > 0.3).float() * 2.0  # a fixed "dropout" pattern, (B, T, d_ff)
    impl.probes.swap(m, {"dropout": impl.probes.FixedMask(fixed)})
    dropped = copy.deepcopy(r)
    dropped.add_module("dropout", ref.probes.FixedMask(fixed))
    x = torch.randn(2, 7, D_MODEL, device=device)
    try:
        check_golden(m, dropped, x, what="FeedForward",
                     name=tr("{what} output with a fixed dropout", what="FeedForward"),
                     hint=tr("the grader replaced dropout by a fixed (B, T, d_ff) mask: apply self.dropout to the "
                             "hidden activations, after the relu and before w2: {recipe}.", recipe=FEED_FORWARD))
    except AssertionError as fixed:
        if not drops_as_measured("FeedForward", lambda p: impl.sublayers.FeedForward(D_MODEL, D_FF, p)):
            raise fixed


def drops_as_measured(kind, build):
    """Whether a `kind` built with dropout 0.3 drops where and as often as it should, read through random weights.

    The fixed mask above reaches only code that calls self.dropout; code that reads self.dropout.p for its own
    F.dropout is judged by what it computes instead, as every spelling of dropout is in the rate tests."""
    try:
        expect_dropout(kind, build(0.3), 0.3, what=kind)
    except AssertionError:
        return False
    return True


# --- ResidualConnection --------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_residual_matches_golden_in_float64")
@pytest.mark.points(1)
def test_residual_connection_has_the_contract_norm(impl):
    info = describe(impl.sublayers.ResidualConnection(24, 0.1))
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {"norm.weight": [24], "norm.bias": [24]}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module="ResidualConnection(24)", got=got,
           expected=expected)
        + hint_suffix("self.norm = nn.LayerNorm(d_model).")  # code only: the same in every language
    )
    for name, kind in (("norm", ".LayerNorm"), ("dropout", ".Dropout")):
        assert info.is_a(name, kind.lstrip(".")), (
            tr("ResidualConnection.{name} should be an nn{kind}, got {got}", name=name, kind=kind,
               got=info.kind_of(name))
        )


@pytest.mark.points(2)
def test_residual_is_pre_norm_not_post_norm(impl, ref, device, seed):
    m, r = residual_pair(impl, ref, device)
    x = 3 * torch.randn(2, 7, D_MODEL, device=device) + 1
    # Post-norm is told apart by a sublayer that shifts (y -> y + b): norm(x + 2 x) is norm(x) up to the norm's own
    # scale, which other mistakes return too.
    remote, local = linear_pair(impl, device)
    with torch.no_grad():
        local.weight.copy_(torch.eye(D_MODEL, device=device))
        local.bias.copy_(torch.randn(D_MODEL, device=device))
    remote.load_state_dict({name: p.detach() for name, p in local.state_dict().items()})
    with torch.no_grad():
        post = r.norm(x + local(x))
    if torch.allclose(run(m, x, remote, what="ResidualConnection"), post, atol=1e-4):
        raise AssertionError(
            tr("ResidualConnection returned norm(x + sublayer(x)): that is post-norm, the original paper's order. The "
               "kit is pre-norm: the sublayer gets norm(x) and x itself is added back, so the identity path never "
               "passes through a LayerNorm.")
            + hint_suffix(tr(PRE_NORM))
        )
    check_golden(m, r, x, impl.probes.Scale(2.0), ref.probes.Scale(2.0), what="ResidualConnection",
                 name=tr("{what} output with sublayer y -> 2 y", what="ResidualConnection"), hint=PRE_NORM)


@pytest.mark.points(1)
def test_residual_path_carries_x_and_its_gradient_unchanged(impl, ref, device, seed):
    m, _ = residual_pair(impl, ref, device)
    x = torch.randn(2, 7, D_MODEL, device=device)
    out = run(m, x, impl.probes.Scale(0.0), what="ResidualConnection")
    assert_close(out, x, atol=0.0, name="ResidualConnection output with a sublayer that returns 0",
                 hint=tr("with nothing from the sublayer only the residual path is left, and it is x itself: "
                         "{pre_norm}", pre_norm=tr(PRE_NORM)))
    grad_output = torch.randn(2, 7, D_MODEL, device=device)
    try:
        got = backward(m, x.clone().requires_grad_(True), impl.probes.Scale(0.0), grad_output=grad_output)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(PRE_NORM))) from None
    assert got.inputs and got.inputs[0] is not None, tr("no gradient reached x: do not detach it")
    assert_close(got.inputs[0], grad_output, atol=0.0, name="gradient of x with a sublayer that returns 0",
                 hint="the gradient flows back through the identity path untouched; that is why residuals let deep "
                      "stacks train.")


SUBLAYERS = {
    "nn.Linear built in the worker": "linear",
    "a plain function (torch.tanh)": "tanh",
}


@pytest.mark.hint_after(RESIDUAL_PLAIN)  # its hint is about the sublayer it is given
@pytest.mark.points(2)
@pytest.mark.parametrize("kind", SUBLAYERS.values(), ids=SUBLAYERS.keys())
def test_any_callable_works_as_the_sublayer(impl, ref, device, seed, kind):
    m, r = residual_pair(impl, ref, device)
    remote, local = linear_pair(impl, device) if kind == "linear" else (impl.torch.tanh, torch.tanh)
    x = torch.randn(2, 7, D_MODEL, device=device)
    check_golden(m, r, x, remote, local, what="ResidualConnection",
                 name=tr("{what} output with sublayer {kind}", what="ResidualConnection", kind=kind),
                 hint=tr("sublayer may be any callable, a module or a function: call it as sublayer(...), never "
                         "sublayer.forward(...). {pre_norm}", pre_norm=tr(PRE_NORM)))


@pytest.mark.hint_after(RESIDUAL_PLAIN, LINEAR_SUBLAYER)  # the same, in float64
@pytest.mark.points(1)
def test_residual_matches_golden_in_float64(impl, ref, device, seed):
    m, r = residual_pair(impl, ref, device)
    m.to(torch.float64)
    remote, local = linear_pair(impl, device)
    remote.to(torch.float64)
    x = torch.randn(2, 7, D_MODEL, device=device, dtype=torch.float64)
    check_golden(m, r, x, remote, local, what="ResidualConnection",
                 name=tr("{what} output in float64", what="ResidualConnection"),
                 hint="in float64: keep the dtype of the input, no .float() and no tensor made without x's dtype.")


@pytest.mark.hint_after(RESIDUAL_PLAIN, LINEAR_SUBLAYER)  # the same, with a fixed dropout
@pytest.mark.points(1)
def test_residual_dropout_acts_on_the_sublayer_output(impl, ref, device, seed):
    m, r = residual_pair(impl, ref, device)
    fixed = (torch.rand(2, 7, D_MODEL, device=device) > 0.3).float() * 2.0  # a fixed "dropout" pattern
    impl.probes.swap(m, {"dropout": impl.probes.FixedMask(fixed)})
    dropped = copy.deepcopy(r)
    dropped.add_module("dropout", ref.probes.FixedMask(fixed))
    remote, local = linear_pair(impl, device)
    x = torch.randn(2, 7, D_MODEL, device=device)
    try:
        check_golden(m, dropped, x, remote, local, what="ResidualConnection",
                     name=tr("{what} output with a fixed dropout", what="ResidualConnection"),
                     hint=tr("the grader replaced dropout by a fixed mask: drop the sublayer's output, after the "
                             "sublayer, never x itself or the sublayer's input. {pre_norm}", pre_norm=tr(PRE_NORM)))
    except AssertionError as fixed:
        if not drops_as_measured("ResidualConnection", lambda p: impl.sublayers.ResidualConnection(D_MODEL, p)):
            raise fixed


@pytest.mark.points(1)
@pytest.mark.parametrize("module", modules_after_their_plain_case())
def test_dropout_only_in_training_mode(impl, ref, device, seed, module):
    if module == "FeedForward":
        m, r = feed_forward_pair(impl, ref, device, dropout=0.5)
        sublayer = ()
    else:
        m, r = residual_pair(impl, ref, device, dropout=0.5)
        sublayer = (impl.probes.Scale(1.0), ref.probes.Scale(1.0))
    x = torch.randn(4, 8, D_MODEL, device=device)
    check_golden(m, r, x, *sublayer, what=module, name=tr("{what} output in eval mode (dropout=0.5)", what=module),
                 hint="in eval mode the output is the one without dropout: use self.dropout, an nn.Dropout that "
                      "switches itself off in eval mode, not F.dropout(..., training=True).")
    m.train()
    first, second = run(m, x, *sublayer[:1], what=module), run(m, x, *sublayer[:1], what=module)
    assert not torch.equal(first, second), (
        tr("{module}(dropout=0.5) in training mode gave the same output twice: apply self.dropout.", module=module)
    )


# --- the default dropout, and dropout's probability ----------------------------------------------

DROPOUT_HINT = {
    "FeedForward": N_("FeedForward(d_model, d_ff, dropout=0.0): self.dropout = nn.Dropout(dropout), with the argument"),
    "ResidualConnection": N_("ResidualConnection(d_model, dropout=0.0): self.dropout = nn.Dropout(dropout), with the "
                             "argument"),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("module", modules_after_their_plain_case())
def test_default_dropout_is_zero_in_training_mode(impl, ref, device, seed, module):
    if module == "FeedForward":
        r, m = ref.sublayers.FeedForward(D_MODEL, D_FF), impl.sublayers.FeedForward(D_MODEL, D_FF)
        sublayer = ()
    else:
        r, m = ref.sublayers.ResidualConnection(D_MODEL), impl.sublayers.ResidualConnection(D_MODEL)
        sublayer = (impl.probes.Scale(2.0), ref.probes.Scale(2.0))
    load_reference(m, r, module)
    m, r = m.to(device).train(), r.to(device).train()
    check_golden(m, r, torch.randn(4, 8, D_MODEL, device=device), *sublayer, what=module,
                 name=tr("{what} output in training mode, built without a dropout argument", what=module),
                 hint=tr("the default is 0.0, so nothing is dropped even in training mode: {recipe}.",
                         recipe=tr(DROPOUT_HINT[module])))


@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("module", ["FeedForward", "ResidualConnection"])
def test_dropout_drops_with_the_probability_it_was_given(impl, seed, module, p):
    sizes = (D_MODEL, D_FF) if module == "FeedForward" else (D_MODEL,)
    m = getattr(impl.sublayers, module)(*sizes, p)
    what = f"{module}({', '.join(map(str, sizes))}, dropout={p})"
    recipe = tr(DROPOUT_HINT[module])
    try:
        for training in (True, False):
            expect_dropout(module, m, p, what=what, training=training,
                           hint=tr("{recipe}, applied once.", recipe=recipe) if training else
                           tr("{recipe}; nn.Dropout does nothing in eval mode.", recipe=recipe))
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr("{recipe}.", recipe=recipe))) from None
