"""Public tests for exercises/sublayers.py: names and shapes, then known answers worked out by hand.

Run them with `grader check sublayers`. They need no reference solution: the weights are set by
hand (identity blocks, zeros) or the sublayer is a module whose effect is easy to predict, and the
expected values are computed here in float64, each tolerance from how far the same computation
lands in float32.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    describe,
    expect_dropout,
    expect_tensor,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
)

D_MODEL, D_FF = 16, 32
PRE_NORM = N_("a ResidualConnection returns x + self.dropout(sublayer(self.norm(x))): normalise, apply, drop, add x.")
DROPOUT_HINT = N_("self.dropout = nn.Dropout(dropout) with the constructor's argument (default 0.0), applied once.")


def load_weights(module, weights, what):
    load_parameters(module, weights, name=what, names_hint=tr("use the attribute names of the docstring"))


def run(module, *args, what, hint=""):
    try:
        return expect_tensor(module(*args), name=tr("{what} output", what=what))
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def pre_norm(x, sublayer):
    """x + sublayer(LayerNorm(x)) with LayerNorm's initial weight 1 and bias 0."""
    return x + sublayer(F.layer_norm(x, (x.size(-1),)))


def check(out, by_hand, x, *, name, hint):
    """`out` against by_hand(x) computed in float64, with the float32 error of by_hand as the tolerance."""
    want = by_hand(x.double())
    assert_close(out, want.to(x.dtype), atol=tolerance(by_hand(x.float()), want), name=name, hint=hint)


@pytest.mark.confirmed_by("test_feed_forward_of_identity_blocks_gives_the_absolute_value")
@pytest.mark.points(1)
def test_feed_forward_has_w1_and_w2_with_biases(impl):
    info = describe(impl.sublayers.FeedForward(D_MODEL, D_FF))
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {"w1.weight": [D_FF, D_MODEL], "w1.bias": [D_FF], "w2.weight": [D_MODEL, D_FF], "w2.bias": [D_MODEL]}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module=f"FeedForward({D_MODEL}, {D_FF})", got=got,
           expected=expected)
        + hint_suffix(tr("w1 = nn.Linear(d_model, d_ff) widens, w2 = nn.Linear(d_ff, d_model) narrows back; both "
                         "keep their bias."))
    )
    assert info.is_a("dropout", "Dropout"), tr("{module} should be an {kind}, got {found}",
                                                module="FeedForward.dropout", kind="nn.Dropout",
                                                found=info.kind_of("dropout"))


@pytest.mark.confirmed_by("test_residual_is_pre_norm")
@pytest.mark.points(1)
def test_residual_connection_has_a_layer_norm_named_norm(impl):
    info = describe(impl.sublayers.ResidualConnection(D_MODEL))
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {"norm.weight": [D_MODEL], "norm.bias": [D_MODEL]}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module=f"ResidualConnection({D_MODEL})", got=got,
           expected=expected)
        + hint_suffix(tr("self.norm = nn.LayerNorm(d_model); the sublayer's parameters belong to the sublayer, not "
                         "here."))
    )
    for name, kind in (("norm", ".LayerNorm"), ("dropout", ".Dropout")):
        assert info.is_a(name, kind.lstrip(".")), tr("{module} should be an {kind}, got {found}",
                                                     module=f"ResidualConnection.{name}", kind=f"nn{kind}",
                                                     found=info.kind_of(name))


@pytest.mark.points(2)
def test_feed_forward_of_identity_blocks_gives_the_absolute_value(impl, device, seed):
    ff = impl.sublayers.FeedForward(D_MODEL, D_FF).to(device).eval()
    eye = torch.eye(D_MODEL, device=device)
    load_weights(ff, {
        "w1.weight": torch.cat([eye, -eye]),  # (d_ff, d_model): the first half copies x, the second negates it
        "w1.bias": torch.zeros(D_FF, device=device),
        "w2.weight": torch.cat([eye, eye], dim=1),  # (d_model, d_ff): adds the two halves back up
        "w2.bias": torch.full((D_MODEL,), 0.5, device=device),
    }, "FeedForward")
    x = torch.randn(2, 7, D_MODEL, device=device)
    check(run(ff, x, what="FeedForward"), lambda x: x.abs() + 0.5, x, name="FeedForward output",
          hint="with w1 = [I; -I] and w2 = [I, I], relu(x) + relu(-x) = |x|, plus the bias 0.5 of w2. Without the "
               "relu the two halves cancel. forward(x) = w2(dropout(relu(w1(x)))).")


@pytest.mark.points(1)
def test_feed_forward_keeps_the_shape_of_its_input(impl, device, seed):
    ff = impl.sublayers.FeedForward(D_MODEL, D_FF).to(device).eval()
    for shape in ((2, 7, D_MODEL), (1, 3, D_MODEL), (5, D_MODEL)):
        out = run(ff, torch.randn(*shape, device=device), what="FeedForward")
        assert tuple(out.shape) == shape, (
            tr("FeedForward output has shape {shape} for an input of shape {input_shape}; expected the same.",
               shape=tuple(out.shape), input_shape=shape)
            + hint_suffix(tr("w2 maps d_ff back to d_model, and nn.Linear acts on the last dim whatever the leading "
                             "dims, so no view or reshape is needed."))
        )


@pytest.mark.points(1)
def test_zero_sublayer_returns_x_unchanged(impl, device, seed):
    rc = impl.sublayers.ResidualConnection(D_MODEL).to(device).eval()
    x = torch.randn(2, 7, D_MODEL, device=device)
    out = run(rc, x, impl.probes.Scale(0.0), what="ResidualConnection")
    assert_close(out, x, atol=0.0, name="ResidualConnection output with a sublayer that returns 0",
                 hint="the residual path adds x itself, untouched: a ResidualConnection returns "
                      "x + self.dropout(sublayer(self.norm(x))): normalise, apply, drop, add x.")


def shifting_sublayer(impl, device):
    """b and the sublayer y -> y + b, an nn.Linear built in the worker with the identity as its weight."""
    shift = torch.randn(D_MODEL, device=device)
    adder = impl.torch.nn.Linear(D_MODEL, D_MODEL).to(device)
    adder.load_state_dict({"weight": torch.eye(D_MODEL, device=device), "bias": shift})
    return shift, adder


@pytest.mark.points(2)
def test_residual_is_pre_norm(impl, device, seed):
    rc = impl.sublayers.ResidualConnection(D_MODEL).to(device).eval()
    x = 3 * torch.randn(2, 7, D_MODEL, device=device) + 1  # far from normalised, so norm(x) and x differ
    out = run(rc, x, impl.probes.Scale(2.0), what="ResidualConnection")
    # Post-norm is told apart by a sublayer that shifts (y -> y + b): norm(x + 2 x) would be norm(x) itself, which
    # other mistakes return too, as a LayerNorm does not see a scale.
    shift, adder = shifting_sublayer(impl, device)
    if torch.allclose(run(rc, x, adder, what="ResidualConnection"), F.layer_norm(2 * x + shift, (D_MODEL,)), atol=1e-4):
        raise AssertionError(
            tr("ResidualConnection returned norm(x + sublayer(x)): that is post-norm. The kit is pre-norm: the "
               "sublayer gets norm(x) and x is added back untouched.") + hint_suffix(tr(PRE_NORM))
        )
    check(out, lambda x: pre_norm(x, lambda y: 2 * y), x, name="ResidualConnection output with sublayer y -> 2 y",
          hint="a ResidualConnection returns x + self.dropout(sublayer(self.norm(x))): normalise, apply, drop, add x "
               "(nn.LayerNorm starts with weight 1 and bias 0).")


@pytest.mark.points(1)
def test_any_module_works_as_the_sublayer(impl, device, seed):
    rc = impl.sublayers.ResidualConnection(D_MODEL).to(device).eval()
    weight, bias = torch.randn(D_MODEL, D_MODEL, device=device) / 4, torch.randn(D_MODEL, device=device)
    linear = impl.torch.nn.Linear(D_MODEL, D_MODEL).to(device)
    linear.load_state_dict({"weight": weight, "bias": bias})
    x = torch.randn(2, 7, D_MODEL, device=device)
    out = run(rc, x, linear, what="ResidualConnection", hint="call the sublayer like a function: sublayer(...).")
    check(out, lambda x: pre_norm(x, lambda y: y @ weight.to(x.dtype).T + bias.to(x.dtype)), x,
          name="ResidualConnection output with an nn.Linear sublayer", hint=PRE_NORM)


# Sublayers whose backward reads their own output: an in-place add onto that output (`out += x`) breaks it.
OUTPUT_SAVING = {"torch.tanh": "tanh", "torch.sigmoid": "sigmoid", "nn.ReLU()": "relu"}
IN_PLACE_HINT = N_("add with x + ..., never += or .add_(): the sublayer's output and x must stay as they were, "
                   "because autograd needs them to compute the gradients.")


def output_saving_pair(impl, kind):
    """The sublayer in the worker and its twin here."""
    if kind == "relu":
        return impl.torch.nn.ReLU(), torch.relu
    return getattr(impl.torch, kind), getattr(torch, kind)


@pytest.mark.hint_after("test_residual_is_pre_norm")  # a gradient is wrong for the same reasons as the output
@pytest.mark.points(1)
@pytest.mark.parametrize("kind", OUTPUT_SAVING.values(), ids=OUTPUT_SAVING.keys())
def test_a_sublayer_whose_backward_needs_its_output_gets_its_gradient(impl, device, seed, kind):
    """The contract's sublayer is any callable: one whose backward reads its output (tanh, sigmoid, ReLU) must get
    it back unchanged, in eval mode (dropout hands the output on as it is) and in training mode without dropout."""
    remote, local = output_saving_pair(impl, kind)
    x = torch.randn(2, 7, D_MODEL, device=device)
    grad_output = torch.randn(2, 7, D_MODEL, device=device)

    def by_hand(x):
        leaf = x.clone().requires_grad_(True)
        (pre_norm(leaf, local) * grad_output.to(x.dtype)).sum().backward()
        return leaf.grad

    want = by_hand(x.double())
    atol = tolerance(by_hand(x.float()), want)
    for mode, dropout in (("eval", 0.3), ("train", 0.0)):
        rc = impl.sublayers.ResidualConnection(D_MODEL, dropout=dropout).to(device)
        rc.train(mode == "train")
        what = tr("ResidualConnection in {mode} mode with sublayer {kind}", mode=mode, kind=kind)
        try:
            got = backward(rc, x.clone().requires_grad_(True), remote, grad_output=grad_output)
        except SubmissionFailure as failure:
            if "inplace" not in str(failure).replace("-", "").replace(" ", ""):
                raise type(failure)(str(failure) + hint_suffix(tr(PRE_NORM))) from None
            raise AssertionError(
                tr("backpropagating through {what} failed: autograd found a tensor it needs changed in place.",
                   what=what) + hint_suffix(tr(IN_PLACE_HINT))
            ) from None
        assert got.inputs and got.inputs[0] is not None, tr("no gradient reached x: do not detach it")
        assert_close(got.inputs[0], want.to(x.dtype), atol=atol, name=tr("gradient of x through {what}", what=what),
                     hint=PRE_NORM)


@pytest.mark.hint_after("test_residual_is_pre_norm")  # the same, with dropout=0.5
@pytest.mark.points(1)
def test_dropout_acts_only_in_training_mode(impl, device, seed):
    rc = impl.sublayers.ResidualConnection(D_MODEL, dropout=0.5).to(device).eval()
    x = torch.randn(4, 8, D_MODEL, device=device)
    evaluated = run(rc, x, impl.probes.Scale(1.0), what="ResidualConnection")
    check(evaluated, lambda x: pre_norm(x, lambda y: y), x, name="ResidualConnection output in eval mode",
          hint="in eval mode the output is the one without dropout: call self.dropout (an nn.Dropout switches itself "
               "off in eval mode), not F.dropout(..., training=True).")
    rc.train()
    added = run(rc, x, impl.probes.Scale(1.0), what="ResidualConnection") - x  # dropout(norm(x)), train mode
    normed = F.layer_norm(x, (D_MODEL,))
    dropped, kept = added.abs() < 1e-6, (added - 2 * normed).abs() < 1e-4
    assert bool(dropped.any()) and bool((dropped | kept).all()), (
        tr("with dropout=0.5 in training mode, out - x should hold 0 (dropped) or 2 * norm(x) (kept, scaled by "
           "1 / (1 - p)) in every entry; {neither} entries are neither and {zero} are 0.",
           neither=int((~(dropped | kept)).sum()), zero=int(dropped.sum()))
        + hint_suffix(tr("dropout acts on the sublayer's output only, not on x: a ResidualConnection returns "
                         "x + self.dropout(sublayer(self.norm(x))): normalise, apply, drop, add x."))
    )


@pytest.mark.points(1)
@pytest.mark.parametrize("module", ["FeedForward", "ResidualConnection"])
def test_dropout_drops_with_the_probability_it_was_given(impl, seed, module):
    sizes = (D_MODEL, D_FF) if module == "FeedForward" else (D_MODEL,)
    try:
        expect_dropout(module, getattr(impl.sublayers, module)(*sizes, 0.3), 0.3, what=f"{module}(..., dropout=0.3)",
                       hint=DROPOUT_HINT)
        expect_dropout(module, getattr(impl.sublayers, module)(*sizes), 0.0,
                       what=tr("{module} built without dropout", module=module), hint=DROPOUT_HINT)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(DROPOUT_HINT))) from None
