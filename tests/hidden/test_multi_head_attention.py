"""Hidden tests for exercises/multi_head_attention.py: structure, head layout, masks, dropout and gradients.

The submission gets the reference's weights (by name; it keeps its own `mask`), so any difference is
in the computation. Expected values are float64: the reference's golden copy, or multi-head attention
written the long way, one head at a time with its slices of the weights. Each tolerance comes from
how far the float32 reference lands from them on the same inputs.
"""

import copy
import math

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    describe,
    expect_structure,
    expect_tensor,
    explained_by_weight_dropout,
    float64,
    golden,
    hint_suffix,
    load_parameters,
    random_keep_mask,
    tolerance,
    tr,
    uniform_causal,
)

DIM, N_HEADS, MAX_SEQ_LEN = 16, 4, 16
HEAD_DIM = DIM // N_HEADS
WEIGHTS = ("wq", "wk", "wv", "wo")


def pair(impl, ref, device, *, is_causal=False, dropout=0.0, n_heads=N_HEADS):
    """The reference module (trusted) and the submission's, holding the same weights, both in eval mode.

    is_causal=None and dropout=None leave them out: ModelArgs' and the constructor's defaults."""
    sizes = {"dim": DIM, "n_heads": n_heads, "max_seq_len": MAX_SEQ_LEN, **({} if dropout is None else
                                                                          {"dropout": dropout})}
    causal = {} if is_causal is None else {"is_causal": is_causal}
    r = ref.multi_head_attention.MultiHeadAttention(ref.config.ModelArgs(**sizes), **causal)
    m = impl.multi_head_attention.MultiHeadAttention(impl.config.ModelArgs(**sizes), **causal)
    weights = {name: p.detach() for name, p in r.named_parameters()}
    load_parameters(m, weights, name="MultiHeadAttention",
                    names_hint=tr("call the layers wq, wk, wv and wo"), allow=("mask",))
    return m.to(device).eval(), r.to(device).eval()


def attend(m, *args, hint="", **kwargs):
    """m(*args, **kwargs), a tensor; `hint` (English, translated here) closes the message when the submission raises."""
    try:
        return expect_tensor(m(*args, **kwargs), name="MultiHeadAttention output")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def check_golden(m, r, q, k, v, mask=None, *, name="output", hint=""):
    """m(q, k, v, mask) against the float64 golden of r, with a tolerance derived from r in float32."""
    want = golden(r, q, k, v, mask)
    if bool(want.isnan().any()):
        raise RuntimeError("the grader's own test is broken: a row of its mask blocks every key")
    atol = tolerance(r(q.float(), k.float(), v.float(), mask), want)
    assert_close(attend(m, q, k, v, mask=mask, hint=hint), want.to(q.dtype), atol=atol, name=name, hint=hint)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_layers_have_the_contract_names_and_shapes(impl):
    args = impl.config.ModelArgs(dim=24, n_heads=3, dropout=0.1, max_seq_len=8)
    m = impl.multi_head_attention.MultiHeadAttention(args)
    info = describe(m)
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {f"{name}.weight": [24, 24] for name in WEIGHTS}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module="MultiHeadAttention(dim=24, n_heads=3)",
           got=got, expected=expected)
        + hint_suffix(tr("wq, wk, wv, wo = nn.Linear(dim, dim, bias=False): one fused projection for all the heads."))
    )
    for name in ("attn_dropout", "resid_dropout"):
        assert info.is_a(name, "Dropout"), (
            tr("MultiHeadAttention.{name} should be an nn.Dropout, got {kind}", name=name, kind=info.kind_of(name))
        )
    assert (m.n_heads, m.head_dim) == (3, 8), tr("n_heads, head_dim are {n_heads}, {head_dim}; expected 3, 8",
                                                 n_heads=m.n_heads, head_dim=m.head_dim)


@pytest.mark.confirmed_by("test_future_tokens_do_not_leak")
@pytest.mark.points(1)
def test_causal_buffer_is_the_additive_mask_of_max_seq_len(impl):
    args = impl.config.ModelArgs(dim=DIM, n_heads=N_HEADS, max_seq_len=12)
    m = impl.multi_head_attention.MultiHeadAttention(args, is_causal=True)
    info = describe(m)
    assert "mask" not in info.parameters, tr("mask is an nn.Parameter: register it with "
                                             "self.register_buffer('mask', ...)")
    assert "mask" in info.buffers, (
        tr("with is_causal=True there is no buffer named mask (buffers: {names})",
           names=sorted(info.buffers) or tr("none"))
    )
    shape = tuple(info.buffers["mask"]["shape"])
    assert shape == (1, 1, 12, 12), (
        tr("{name} has shape {shape}, expected {expected}", name="mask", shape=shape,
           expected="(1, 1, max_seq_len, max_seq_len) = (1, 1, 12, 12)")
    )
    mask = m.mask.double()
    allowed = torch.ones(12, 12, dtype=torch.bool).tril()
    assert_close(mask[0, 0][allowed], torch.zeros(int(allowed.sum()), dtype=torch.float64), atol=0.0,
                 name="mask on and below the diagonal", hint="use causal_mask(args.max_seq_len) from masking.py.")
    above = mask[0, 0][~allowed]
    assert bool((above <= -1e9).all()), (
        tr("mask above the diagonal should be -inf, got {value}: use causal_mask(args.max_seq_len), an additive mask "
           "(0 = allowed, -inf = blocked).", value=format(above.max().item(), ".3g"))
    )


@pytest.mark.points(1)
@pytest.mark.parametrize("dim, n_heads", [(10, 4), (12, 5)])
def test_dim_not_divisible_by_n_heads_is_refused(impl, dim, n_heads):
    args = impl.config.ModelArgs(dim=dim, n_heads=n_heads)
    try:
        impl.multi_head_attention.MultiHeadAttention(args)
    except SubmissionFailure as failure:
        raised = failure.kind in ("ValueError", "AssertionError")  # what the submission raised, in any language
        assert raised, tr("expected ValueError or AssertionError for dim {dim} and n_heads {n_heads}, got: {failure}",
                          dim=dim, n_heads=n_heads, failure=failure)
    else:
        raise AssertionError(
            tr("{module} was built without complaint: {dim} features cannot be split into {n_heads} equal heads.",
               module=f"MultiHeadAttention(ModelArgs(dim={dim}, n_heads={n_heads}))", dim=dim, n_heads=n_heads)
            + hint_suffix(tr("raise ValueError when args.dim % args.n_heads != 0."))
        )


# --- agreement with the golden -----------------------------------------------------------------


def padding(batch, keys):
    """A padding keep mask (B, 1, 1, T_k): each batch element keeps its first 2..T_k-1 keys."""

    def make(generator, device):
        lengths = torch.randint(2, keys, (batch, 1), generator=generator)
        return (torch.arange(keys) < lengths).view(batch, 1, 1, keys).to(device)

    return make


SPLIT = N_("split q with T_q and k, v with their own length T_k, each .view(B, T, n_heads, head_dim).transpose(1, 2).")
CAUSAL = N_("add self.mask[:, :, :T_q, :T_k] to the scores (its top-left corner when T < max_seq_len).")
KEEP = N_("set the scores where mask == 0 to -inf before the softmax; the mask broadcasts against (B, n_heads, T_q, "
          "T_k).")
CASES = {  # batch, T_q, T_k, is_causal, keep mask, hint
    "self-attention": (2, 7, 7, False, None, N_("scores = xq @ xk.transpose(-2, -1) / sqrt(head_dim); split q with "
                                                "T_q and k, v with their own length T_k, each .view(B, T, n_heads, "
                                                "head_dim).transpose(1, 2).")),
    "causal, T < max_seq_len": (2, 7, 7, True, None, CAUSAL),
    "causal, T = max_seq_len": (2, MAX_SEQ_LEN, MAX_SEQ_LEN, True, None, CAUSAL),
    "cross-attention, 5 queries, 9 keys": (2, 5, 9, False, None, SPLIT),
    "keep mask (B, n_heads, T, T)": (
        2, 7, 7, False, lambda g, d: random_keep_mask((2, N_HEADS, 7, 7), generator=g, device=d), KEEP),
    "causal and padding mask (B, 1, 1, T)": (
        2, 7, 7, True, padding(2, 7), N_("apply both masks: the causal one and then the keep mask, not one instead "
                                         "of the other.")),
    "cross-attention and padding mask (B, 1, 1, T_k)": (2, 5, 9, False, padding(2, 9), KEEP),
    "cross-attention and a 0/1 float mask (T_q, T_k)": (
        2, 5, 9, False, lambda g, d: random_keep_mask((5, 9), generator=g).float().to(d), KEEP),
    "batch of one": (1, 7, 7, True, None, N_("take B from q.shape; do not assume a batch of 2 or more.")),
}


PLAIN = "test_matches_golden[self-attention]"
CAUSAL_PLAIN = "test_matches_golden[causal, T < max_seq_len]"


@pytest.mark.points(1)
@pytest.mark.parametrize("batch, T_q, T_k, is_causal, make_mask, hint", [
    # Each case's hint is about its twist, so it assumes the plain case is right.
    pytest.param(*case, id=name, marks=() if name == "self-attention" else pytest.mark.hint_after(PLAIN))
    for name, case in CASES.items()])
def test_matches_golden(impl, ref, device, seed, batch, T_q, T_k, is_causal, make_mask, hint):
    m, r = pair(impl, ref, device, is_causal=is_causal)
    q = torch.randn(batch, T_q, DIM, device=device)
    kv = q if T_q == T_k else torch.randn(batch, T_k, DIM, device=device)
    mask = make_mask(torch.Generator().manual_seed(seed), device) if make_mask else None
    check_golden(m, r, q, kv, kv, mask, hint=hint)


@pytest.mark.hint_after(CAUSAL_PLAIN)
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=True)
    m.to(torch.float64)
    x = torch.randn(2, 7, DIM, device=device, dtype=torch.float64)
    check_golden(m, r, x, x, x, hint="the causal case in float64: if only this test fails, look for a hard-coded "
                                     "float32 (.float(), dtype=torch.float32) or a tensor made without the dtype of "
                                     "the inputs.")


# --- the head layout -----------------------------------------------------------------------------


def heads_by_hand(r, q, k, v):
    """Multi-head attention the long way, in float64: head h uses rows [h*hd, (h+1)*hd) of wq, wk, wv,
    and its output goes through the same columns of wo; the heads' contributions add up."""
    wq, wk, wv, wo = (getattr(r, name).weight.detach().double() for name in WEIGHTS)
    out = 0
    for h in range(N_HEADS):
        rows = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
        qh, kh, vh = q.double() @ wq[rows].T, k.double() @ wk[rows].T, v.double() @ wv[rows].T  # (B, T, hd)
        weights = (qh @ kh.transpose(-2, -1) / math.sqrt(HEAD_DIM)).softmax(dim=-1)  # (B, T_q, T_k)
        out = out + (weights @ vh) @ wo[:, rows].T  # (B, T_q, dim)
    return out


@pytest.mark.points(2)
def test_head_h_uses_its_own_slices_of_the_weights(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    q, kv = torch.randn(2, 5, DIM, device=device), torch.randn(2, 9, DIM, device=device)
    want = heads_by_hand(r, q, kv, kv)
    hint = N_("head h must use rows [h*head_dim, (h+1)*head_dim) of wq, wk, wv: split with "
              ".view(B, T, n_heads, head_dim).transpose(1, 2); a view straight to (B, n_heads, T, head_dim) mixes "
              "tokens across heads. Merge back with .transpose(1, 2).contiguous().view(B, T, dim).")
    assert_heads_close(impl, ref, device, attend(m, q, kv, kv), want.float(), atol=tolerance(r(q, kv, kv), want),
                       name="output against the heads computed one at a time", hint=hint)


@pytest.mark.points(1)
def test_causal_heads_are_head_attentions_side_by_side(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=True)
    x = torch.randn(2, 9, DIM, device=device)
    wq, wk, wv, wo = (getattr(r, name).weight.detach().double() for name in WEIGHTS)
    heads = []
    for h in range(N_HEADS):
        rows = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
        head = ref.head_attention.HeadAttention(DIM, HEAD_DIM, 9).to(device).double().eval()
        with torch.no_grad():
            for layer, weight in (("query", wq), ("key", wk), ("value", wv)):
                getattr(head, layer).weight.copy_(weight[rows])
        heads.append(head(x.double()))  # (B, T, hd)
    want = torch.cat(heads, dim=-1) @ wo.T  # (B, T, dim)
    hint = N_("a causal MultiHeadAttention is n_heads HeadAttentions side by side (head h with rows "
              "[h*head_dim, (h+1)*head_dim) of wq, wk, wv), concatenated, then wo.")
    assert_heads_close(impl, ref, device, attend(m, x, x, x), want.float(), atol=tolerance(r(x, x, x), want),
                       name="output against concatenated HeadAttention heads", hint=hint)


def assert_heads_close(impl, ref, device, actual, want, *, atol, name, hint):
    """assert_close, with the heads' layout as the hint (English, marked N_ where written) only where the layout is
    what differs: with one head, where there is nothing to split or merge, the module computes what the reference
    does."""
    try:
        assert_close(actual, want, atol=atol, name=name)
    except AssertionError as failure:
        if one_head_is_right(impl, ref, device):
            raise AssertionError(str(failure) + hint_suffix(tr(hint))) from None
        raise AssertionError(str(failure) + " " + tr("With one head, where there is nothing to split or merge, the "
                                                     "output differs too: the heads' layout is not the only cause.")
                             ) from None


def one_head_is_right(impl, ref, device):
    try:
        m, r = pair(impl, ref, device, n_heads=1)
        x = torch.randn(2, 5, DIM, device=device)
        want = golden(r, x, x, x)
        assert_close(attend(m, x, x, x), want.float(), atol=tolerance(r(x, x, x), want))
    except (AssertionError, SubmissionFailure):
        return False
    return True


# --- independence, dropout, gradients ------------------------------------------------------------


@pytest.mark.points(1)
def test_batch_elements_are_independent(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, is_causal=True)
    x = torch.randn(3, 7, DIM, device=device)
    changed = x.clone()
    changed[1] = torch.randn(7, DIM, device=device)
    before, after = attend(m, x, x, x), attend(m, changed, changed, changed)
    assert_close(after[0], before[0], atol=1e-5, name="output of batch element 0",
                 hint="only batch element 1 changed: keep the batch dim first in every view and transpose.")


@pytest.mark.points(1)
def test_future_tokens_do_not_leak(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, is_causal=True)
    x = torch.randn(2, 10, DIM, device=device)
    before = attend(m, x, x, x)
    for t in (0, 5, 8):
        changed = x.clone()
        changed[:, t + 1:] = torch.randn_like(changed[:, t + 1:])
        after = attend(m, changed, changed, changed)
        leak = (after[:, : t + 1] - before[:, : t + 1]).abs().amax(dim=(0, 2)) > 1e-5
        if bool(leak.any()):
            s = int(torch.nonzero(leak)[0])
            raise AssertionError(
                tr("output at position {s} changed when only positions {first} to {last} changed: the mask lets the "
                   "future leak.", s=s, first=t + 1, last=9)
                + hint_suffix(tr("add self.mask[:, :, :T_q, :T_k] to the scores before the softmax."))
            )


@pytest.mark.hint_after(CAUSAL_PLAIN)
@pytest.mark.points(1)
def test_eval_mode_is_deterministic_and_matches_golden(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=True, dropout=0.5)
    x = torch.randn(2, 7, DIM, device=device)
    # NaN in both calls is no sign of dropout (a causal mask that blocks a whole row): the golden check names it.
    assert torch.allclose(attend(m, x, x, x), attend(m, x, x, x), rtol=0, atol=0, equal_nan=True), (
        tr("in eval mode two calls on the same input differ: dropout must be off in eval mode")
    )
    check_golden(m, r, x, x, x, hint="built with dropout=0.5 but in eval mode, the module must give the no-dropout "
                                     "output: call self.attn_dropout and self.resid_dropout (they switch off in eval), "
                                     "not F.dropout(..., training=True).")


@pytest.mark.points(1)
def test_training_mode_applies_dropout(impl, ref, device, seed):
    m, _ = pair(impl, ref, device, dropout=0.5)
    x = torch.randn(4, 8, DIM, device=device)
    evaluated = attend(m, x, x, x)
    m.train()
    first, second = attend(m, x, x, x), attend(m, x, x, x)
    assert not torch.equal(first, second) and not torch.equal(first, evaluated), (
        tr("with dropout=0.5 in training mode the output did not change from call to call: apply self.attn_dropout "
           "and self.resid_dropout.")
    )


@pytest.mark.hint_after(CAUSAL_PLAIN)
@pytest.mark.points(1)
def test_dropout_acts_on_the_weights_and_on_the_output(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=True)
    on_weights = (torch.rand(2, N_HEADS, 7, 7, device=device) > 0.3).float() * 2.0  # fixed "dropout" patterns
    on_output = (torch.rand(2, 7, DIM, device=device) > 0.3).float() * 2.0
    impl.probes.swap(m, {"attn_dropout": impl.probes.FixedMask(on_weights),
                         "resid_dropout": impl.probes.FixedMask(on_output)})
    dropped = copy.deepcopy(r)
    dropped.add_module("attn_dropout", ref.probes.FixedMask(on_weights))
    dropped.add_module("resid_dropout", ref.probes.FixedMask(on_output))
    x = torch.randn(2, 7, DIM, device=device)
    try:
        check_golden(m, dropped, x, x, x, name="output with fixed dropouts",
                     hint="the grader replaced attn_dropout by a fixed (B, n_heads, T_q, T_k) mask and resid_dropout "
                          "by a fixed (B, T_q, dim) one: apply attn_dropout to the softmax weights and resid_dropout "
                          "to the output of wo.")
    except AssertionError as fixed:
        if not drops_the_weights_and_the_output_in_training(impl, device):
            raise fixed


def drops_the_weights_and_the_output_in_training(impl, device):
    """Whether, in training mode, every output is one that dropout on the attention weights and on the output gives.

    The fixed masks only reach code that calls attn_dropout on (B, n_heads, T_q, T_k) weights; code that drops
    them its own way (dropout_p of F.scaled_dot_product_attention, an inner module, heads folded into the batch)
    is judged on what it computes: 96 copies of 4 tokens with wq = 0 and wk, wv, wo = I, checked against every
    dropout pattern.
    """
    args = impl.config.ModelArgs(dim=DIM, n_heads=N_HEADS, dropout=0.25, max_seq_len=MAX_SEQ_LEN)
    m = impl.multi_head_attention.MultiHeadAttention(args, is_causal=True)
    weights = {f"{name}.weight": torch.eye(DIM) for name in WEIGHTS}
    weights["wq.weight"] = torch.zeros(DIM, DIM)  # all scores 0: weight 1/(t+1) on positions 0..t
    load_parameters(m, weights, name="MultiHeadAttention", names_hint=tr("call the layers wq, wk, wv and wo"),
                    allow=("mask",))
    m.to(device).train()
    x = torch.randn(96, 4, DIM, device=device)
    return explained_by_weight_dropout(lambda: attend(m, x, x, x), x, uniform_causal(4), p=0.25, groups=N_HEADS,
                                       output_dropout=True)


@pytest.mark.points(2)
def test_every_parameter_gets_the_golden_gradient(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=True)
    x = torch.randn(2, 7, DIM, device=device)

    def leaves(dtype):
        return [x.detach().to(dtype).requires_grad_(True) for _ in range(3)]  # q, k, v: three separate inputs

    grad_output = torch.randn(2, 7, DIM, device=device)
    with float64(r):
        golden_grads = backward(r, *leaves(torch.float64), grad_output=grad_output.double())
    ref32 = backward(r, *leaves(torch.float32), grad_output=grad_output)
    got = backward(m, *leaves(torch.float32), grad_output=grad_output)
    for name, want in golden_grads.parameters.items():
        grad = got.parameters.get(name)
        assert grad is not None, tr("no gradient reached {name}: use it in forward, without .detach() or "
                                    "torch.no_grad()", name=name)
        assert_close(grad, want.float(), atol=tolerance(ref32.parameters[name], want),
                     name=tr("gradient of {name}", name=name))
    for name, grad, want, ref_grad in zip("qkv", got.inputs, golden_grads.inputs, ref32.inputs, strict=True):
        assert grad is not None, tr("no gradient reached the input {name}: do not detach it", name=name)
        assert_close(grad, want.float(), atol=tolerance(ref_grad, want),
                     name=tr("gradient of the input {name}", name=name))


# --- defaults ------------------------------------------------------------------------------------


@pytest.mark.hint_after(PLAIN)
@pytest.mark.points(1)
def test_defaults_in_training_mode_match_golden(impl, ref, device, seed):
    m, r = pair(impl, ref, device, is_causal=None, dropout=None)
    m.train()
    r.train()
    x = torch.randn(2, 7, DIM, device=device)
    check_golden(m, r, x, x, x, name="output in training mode of MultiHeadAttention(args) (ModelArgs' dropout, "
                                     "is_causal left out)",
                 hint="is_causal defaults to False (no causal mask), and ModelArgs' dropout defaults to 0.0, so "
                      "nothing is dropped: self.attn_dropout and self.resid_dropout = nn.Dropout(args.dropout), the "
                      "first on the attention weights, the second on the output after wo.")


@pytest.mark.points(1)
@pytest.mark.parametrize("is_causal", [False, True], ids=["not causal", "causal"])
def test_default_model_args_give_the_reference_structure(impl, ref, is_causal):
    expect_structure(impl.multi_head_attention.MultiHeadAttention(impl.config.ModelArgs(), is_causal=is_causal),
                     ref.multi_head_attention.MultiHeadAttention(ref.config.ModelArgs(), is_causal=is_causal),
                     what=f"MultiHeadAttention(ModelArgs(), is_causal={is_causal})",
                     hint="take every size from args: nn.Linear(args.dim, args.dim, bias=False), "
                          "causal_mask(args.max_seq_len), never a number of your own.")


