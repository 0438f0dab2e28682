"""Hidden tests for exercises/head_attention.py: structure, then agreement with a float64 golden of the reference.

The submission gets the reference's weights (by name; it keeps its own `tril`), so any difference is
in the computation. Each tolerance comes from how far the float32 reference lands from its float64
copy on the same inputs.
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
    explained_by_weight_dropout,
    float64,
    golden,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
    uniform_causal,
)

N_EMBD, HEAD_SIZE, BLOCK_SIZE = 24, 6, 10  # head_size != n_embd on purpose


def pair(impl, ref, device, *, n_embd=N_EMBD, head_size=HEAD_SIZE, block_size=BLOCK_SIZE, dropout=0.0):
    """The reference head (trusted) and the submission's, holding the same weights, both in eval mode.

    dropout=None builds both without a dropout argument: with the default."""
    given = {} if dropout is None else {"dropout": dropout}
    r = ref.head_attention.HeadAttention(n_embd, head_size, block_size, **given).to(device).eval()
    m = impl.head_attention.HeadAttention(n_embd, head_size, block_size, **given).to(device).eval()
    weights = {name: p.detach() for name, p in r.named_parameters()}
    load_parameters(m, weights, name="HeadAttention",
                    names_hint=tr("call the layers key, query and value"), allow=("tril",))
    return m, r


def call(m, x, hint=""):
    """m(x), a tensor; `hint` (English, translated here) closes the message when the submission raises."""
    try:
        return expect_tensor(m(x), name="HeadAttention output")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def check_golden(m, r, x, *, name="output", hint=""):
    """The submission's m(x) against the float64 golden of r, with a tolerance derived from r in float32."""
    want = golden(r, x)
    atol = tolerance(r(x.float()), want)
    assert_close(call(m, x, hint), want.to(x.dtype), atol=atol, name=name, hint=hint)


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_layers_are_key_query_value_without_bias(impl, device):
    info = describe(impl.head_attention.HeadAttention(N_EMBD, HEAD_SIZE, BLOCK_SIZE))
    for name in ("key", "query", "value"):
        assert info.is_a(name, "Linear"), (
            tr("HeadAttention.{name} should be an nn.Linear, got {kind}", name=name, kind=info.kind_of(name))
        )
    got = {name: p["shape"] for name, p in info.parameters.items() if name != "tril"}
    expected = {f"{name}.weight": [HEAD_SIZE, N_EMBD] for name in ("key", "query", "value")}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.",
           module=f"HeadAttention({N_EMBD}, {HEAD_SIZE}, {BLOCK_SIZE})", got=got, expected=expected)
        + hint_suffix(tr("nn.Linear(n_embd, head_size, bias=False) maps n_embd features to head_size."))
    )
    assert info.is_a("dropout", "Dropout"), tr("HeadAttention.dropout should be an nn.Dropout")


@pytest.mark.confirmed_by("test_future_tokens_do_not_leak", "test_matches_golden")
@pytest.mark.points(1)
def test_tril_is_a_lower_triangular_buffer_not_a_parameter(impl, device):
    m = impl.head_attention.HeadAttention(N_EMBD, HEAD_SIZE, BLOCK_SIZE)
    info = describe(m)
    assert "tril" not in info.parameters, (
        tr("tril is an nn.Parameter, so an optimizer would train it: register it with "
           "self.register_buffer('tril', ...)")
    )
    assert "tril" in info.buffers, tr("no buffer named tril (buffers: {names})",
                                      names=sorted(info.buffers) or tr("none"))
    shape = tuple(info.buffers["tril"]["shape"])
    assert shape == (BLOCK_SIZE, BLOCK_SIZE), tr("{name} has shape {shape}, expected {expected}", name="tril",
                                                 shape=shape, expected=(BLOCK_SIZE, BLOCK_SIZE))
    assert_close(m.tril, torch.ones(BLOCK_SIZE, BLOCK_SIZE).tril(), atol=0.0, name="tril", check_dtype=False,
                 hint="ones on and below the diagonal, zeros above.")


PLAIN_CASE = "T = block_size"
PLAIN = f"test_matches_golden[{PLAIN_CASE}]"
LENGTHS = {  # batch, T, hint
    "T < block_size": (3, 7, N_("T = x.size(1) is shorter than block_size here, and the mask is the top-left corner "
                                "of tril, self.tril[:T, :T].")),
    PLAIN_CASE: (2, BLOCK_SIZE, N_("k, q, v = self.key(x), self.query(x), self.value(x); scores = q @ "
                                   "k.transpose(-2, -1) / sqrt(head_size); -inf where self.tril[:T, :T] == 0; softmax "
                                   "over the keys (dim=-1); self.dropout; then @ v.")),
    "batch of one, T = 1": (1, 1, N_("take B and T from x.shape; with T = 1 the one position attends to itself "
                                     "alone, with weight 1, so the output is v.")),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("batch, T, hint", [
    # A shorter sequence's hint and a batch of one's are about their twist: they assume the plain case is right.
    pytest.param(*case, id=name, marks=() if name == PLAIN_CASE else pytest.mark.hint_after(PLAIN))
    for name, case in LENGTHS.items()])
def test_matches_golden(impl, ref, device, seed, batch, T, hint):
    m, r = pair(impl, ref, device)
    check_golden(m, r, torch.randn(batch, T, N_EMBD, device=device), hint=hint)


@pytest.mark.points(1)
def test_future_tokens_do_not_leak(impl, ref, device, seed):
    m, _ = pair(impl, ref, device)
    x = torch.randn(2, BLOCK_SIZE, N_EMBD, device=device)
    before = call(m, x)
    for t in (0, 4, BLOCK_SIZE - 2):
        changed = x.clone()
        changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:])
        after = call(m, changed)
        leak = (after[:, : t + 1] - before[:, : t + 1]).abs().amax(dim=(0, 2)) > 1e-5
        if bool(leak.any()):
            s = int(torch.nonzero(leak)[0])
            raise AssertionError(
                tr("output at position {s} changed when only positions {first} to {last} changed: the mask lets the "
                   "future leak.", s=s, first=t + 1, last=BLOCK_SIZE - 1)
                + hint_suffix(tr("scores where tril[:T, :T] == 0 become -inf before the softmax."))
            )


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_scales_by_sqrt_head_size_not_n_embd(impl, ref, device, seed):
    m, r = pair(impl, ref, device, n_embd=32, head_size=4)
    check_golden(m, r, 3 * torch.randn(2, 8, 32, device=device),
                 hint="divide the scores by sqrt(head_size) = 2, the width of q and k, not by sqrt(n_embd) = 5.7.")


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    m.to(torch.float64)
    check_golden(m, r, torch.randn(2, 7, N_EMBD, device=device, dtype=torch.float64),
                 hint="in float64: look for a hard-coded float32 (.float(), dtype=torch.float32) or a tensor "
                      "made without the dtype of x.")


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_eval_mode_is_deterministic_and_matches_golden(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dropout=0.5)
    x = torch.randn(3, 8, N_EMBD, device=device)
    assert torch.equal(call(m, x), call(m, x)), tr("in eval mode two calls on the same input differ: no dropout in "
                                                   "eval")
    check_golden(m, r, x, hint="built with dropout=0.5 but in eval mode, the head must give the no-dropout output: "
                               "call self.dropout (it switches off in eval), not F.dropout(..., training=True).")


@pytest.mark.points(1)
def test_training_mode_applies_dropout(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, dropout=0.5)
    x = torch.randn(4, BLOCK_SIZE, N_EMBD, device=device)
    evaluated = call(m, x)
    m.train()
    first, second = call(m, x), call(m, x)
    assert not torch.equal(first, second) and not torch.equal(first, evaluated), (
        tr("with dropout=0.5 in training mode the output did not change from call to call: apply self.dropout "
           "to the attention weights.")
    )


@pytest.mark.hint_after("test_matches_golden")  # its hint assumes the plain cases are right
@pytest.mark.points(1)
def test_dropout_acts_on_the_attention_weights(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    keep = (torch.rand(2, 8, 8, device=device) > 0.3).float() * 2.0  # a fixed "dropout" on the (B, T, T) weights
    impl.probes.swap(m, {"dropout": impl.probes.FixedMask(keep)})
    dropped = copy.deepcopy(r)
    dropped.add_module("dropout", ref.probes.FixedMask(keep))
    try:
        check_golden(m, dropped, torch.randn(2, 8, N_EMBD, device=device), name="output with a fixed dropout",
                     hint="the grader replaced self.dropout by a fixed (B, T, T) mask: apply self.dropout to the "
                          "softmax weights, before @ v, not to the output.")
    except AssertionError as fixed:
        if not drops_the_weights_in_training(impl, device):
            raise fixed


def drops_the_weights_in_training(impl, device):
    """Whether, in training mode, every output is one that dropout on the attention weights gives.

    The fixed mask only reaches code that calls self.dropout on the (B, T, T) weights; code that drops them its
    own way (dropout_p of F.scaled_dot_product_attention, say) is judged on what it computes: 96 copies of 4
    tokens with query = 0 and value picking the first head_size features, checked against every dropout pattern.
    """
    m = impl.head_attention.HeadAttention(N_EMBD, HEAD_SIZE, BLOCK_SIZE, 0.25)
    value = torch.eye(HEAD_SIZE, N_EMBD)  # value(x) = x[..., :HEAD_SIZE]
    load_parameters(m, {"query.weight": torch.zeros(HEAD_SIZE, N_EMBD), "key.weight": torch.randn(HEAD_SIZE, N_EMBD),
                        "value.weight": value}, name="HeadAttention", names_hint="key, query, value", allow=("tril",))
    m.to(device).train()
    x = torch.randn(96, 4, N_EMBD, device=device)
    return explained_by_weight_dropout(lambda: call(m, x), x[..., :HEAD_SIZE], uniform_causal(4), p=0.25,
                                       groups=1, output_dropout=False)


@pytest.mark.points(1)
def test_gradients_match_golden(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    x = torch.randn(2, 7, N_EMBD, device=device, requires_grad=True)
    grad_output = torch.randn(2, 7, HEAD_SIZE, device=device)
    with float64(r):
        golden_grads = backward(r, x.detach().double().requires_grad_(True), grad_output=grad_output.double())
    ref32 = backward(r, x, grad_output=grad_output)
    got = backward(m, x, grad_output=grad_output)
    for name, want in golden_grads.parameters.items():
        grad = got.parameters.get(name)
        assert grad is not None, tr("no gradient reached {name}: keep the computation in torch, without .detach()",
                                    name=name)
        assert_close(grad, want.float(), atol=tolerance(ref32.parameters[name], want),
                     name=tr("gradient of {name}", name=name))
    assert got.inputs and got.inputs[0] is not None, tr("no gradient reached x: do not detach it")
    assert_close(got.inputs[0], golden_grads.inputs[0].float(), atol=tolerance(ref32.inputs[0], golden_grads.inputs[0]),
                 name="gradient of x")


# --- the default dropout, and dropout's probability ----------------------------------------------

DROPOUT_HINT = N_("HeadAttention(n_embd, head_size, block_size, dropout=0.0): self.dropout = nn.Dropout(dropout), "
                  "with the argument, applied once to the attention weights.")


@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_dropout_drops_with_the_probability_it_was_given(impl, seed, p):
    m = impl.head_attention.HeadAttention(N_EMBD, HEAD_SIZE, BLOCK_SIZE, dropout=p)
    what = f"HeadAttention({N_EMBD}, {HEAD_SIZE}, {BLOCK_SIZE}, dropout={p})"
    try:
        expect_dropout("HeadAttention", m, p, what=what, hint=DROPOUT_HINT)
        expect_dropout("HeadAttention", m, p, what=what, training=False,
                       hint="call self.dropout (it switches off in eval), not F.dropout(..., training=True).")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(DROPOUT_HINT))) from None
