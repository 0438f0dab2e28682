"""Public tests for exercises/multi_head_attention.py: names and shapes, masks, heads, and known answers.

Run them with `grader check multi_head_attention`. They need no reference solution: the expected
values are properties every multi-head attention has, or answers worked out by hand from weights
set to 0 and I.
"""

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_dropout,
    expect_tensor,
    explained_by_weight_dropout,
    hint_suffix,
    load_parameters,
    tr,
    uniform_causal,
)

DIM, N_HEADS, MAX_SEQ_LEN = 16, 4, 16

# The course notes' five 4-dimensional tokens; attending with q = k = v = TOKENS and d_k = 4, the
# weights of the first and last token are printed there.
TOKENS = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0.5, 0.5, 0]]
FIRST_ROW = [0.2976, 0.1095, 0.1805, 0.1805, 0.2318]
LAST_ROW = [0.2374, 0.1440, 0.2374, 0.1440, 0.2374]


def mha(impl, device, *, dim=DIM, n_heads=N_HEADS, max_seq_len=MAX_SEQ_LEN, is_causal=False, dropout=0.0):
    args = impl.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=dropout, max_seq_len=max_seq_len)
    return impl.multi_head_attention.MultiHeadAttention(args, is_causal=is_causal).to(device).eval()


def load_weights(module, weights):
    """Load hand-made weights by name; the module keeps its own `mask`."""
    load_parameters(module, weights, name="MultiHeadAttention",
                    names_hint=tr("call the layers wq, wk, wv and wo"), allow=("mask",))


def attend(m, *args, hint="", **kwargs):
    try:
        return expect_tensor(m(*args, **kwargs), name="MultiHeadAttention output")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


@pytest.mark.points(1)
@pytest.mark.parametrize("T_q, T_k", [(7, 7), (5, 9)], ids=["self-attention", "cross-attention, T_q != T_k"])
def test_output_has_the_shape_of_the_queries(impl, device, seed, T_q, T_k):
    q, kv = torch.randn(2, T_q, DIM, device=device), torch.randn(2, T_k, DIM, device=device)
    out = attend(mha(impl, device), q, kv, kv)
    assert tuple(out.shape) == (2, T_q, DIM), (
        tr("output has shape {shape} for q of shape {q_shape} and k, v of shape {kv_shape}; expected {expected} = "
           "(B, T_q, dim).", shape=tuple(out.shape), q_shape=(2, T_q, DIM), kv_shape=(2, T_k, DIM),
           expected=(2, T_q, DIM))
        + hint_suffix(tr("split k and v with their own length, k.size(1)."))
    )


@pytest.mark.confirmed_by("test_course_notes_example_in_two_heads", "test_output_goes_through_wo")
@pytest.mark.points(2)
def test_layers_and_causal_buffer_have_the_contract_names_and_shapes(impl, device):
    m = mha(impl, device, is_causal=True)
    info = describe(m)
    got = {name: p["shape"] for name, p in info.parameters.items()}
    expected = {f"{name}.weight": [DIM, DIM] for name in ("wq", "wk", "wv", "wo")}
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.", module=f"MultiHeadAttention(dim={DIM})", got=got,
           expected=expected)
        + hint_suffix(tr("wq, wk, wv, wo = nn.Linear(dim, dim, bias=False)."))
    )
    assert (m.n_heads, m.head_dim) == (N_HEADS, DIM // N_HEADS), tr(
        "n_heads, head_dim are {n_heads}, {head_dim}; expected {want_heads}, {want_dim} = dim // n_heads",
        n_heads=m.n_heads, head_dim=m.head_dim, want_heads=N_HEADS, want_dim=DIM // N_HEADS)
    assert "mask" in info.buffers, (
        tr("with is_causal=True there is no buffer named mask (buffers: {names}).",
           names=sorted(info.buffers) or tr("none"))
        + hint_suffix(tr("self.register_buffer('mask', causal_mask(args.max_seq_len))."))
    )
    shape = tuple(info.buffers["mask"]["shape"])
    assert shape == (1, 1, MAX_SEQ_LEN, MAX_SEQ_LEN), tr(
        "mask has shape {shape}, expected (1, 1, max_seq_len, max_seq_len) = {expected}", shape=shape,
        expected=(1, 1, MAX_SEQ_LEN, MAX_SEQ_LEN))


@pytest.mark.points(1)
def test_dim_not_divisible_by_n_heads_is_refused(impl):
    try:
        mha(impl, "cpu", dim=10, n_heads=4)
    except SubmissionFailure as failure:
        raised = failure.kind in ("ValueError", "AssertionError")  # what the submission raised, in any language
        assert raised, tr("expected ValueError or AssertionError for dim 10 and n_heads 4, got: {failure}",
                          failure=failure)
    else:
        raise AssertionError(
            tr("MultiHeadAttention(ModelArgs(dim=10, n_heads=4)) was built without complaint: 10 features cannot be "
               "split into 4 equal heads.")
            + hint_suffix(tr("raise ValueError when args.dim % args.n_heads != 0."))
        )


@pytest.mark.points(1)
@pytest.mark.parametrize("padded", [False, True], ids=["no extra mask", "with a padding mask too"])
def test_future_tokens_do_not_leak(impl, device, seed, padded):
    m = mha(impl, device, is_causal=True)
    x = torch.randn(2, 10, DIM, device=device)
    keep = torch.ones(2, 1, 1, 10, dtype=torch.bool, device=device)
    keep[:, ..., 8:] = False  # the last two positions are padding
    mask = {"mask": keep} if padded else {}
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, DIM, device=device)
    before, after = attend(m, x, x, x, **mask), attend(m, changed, changed, changed, **mask)
    leak = (after[:, :6] - before[:, :6]).abs().amax(dim=(0, 2)) > 1e-5
    if bool(leak.any()):
        t = int(torch.nonzero(leak)[0])
        hint = (N_("add self.mask[:, :, :T_q, :T_k] to the scores before the softmax; apply the padding mask as "
                   "well, not instead of it.") if padded
                else N_("add self.mask[:, :, :T_q, :T_k] to the scores before the softmax."))
        raise AssertionError(
            tr("output at position {t} changed when only positions 6 to 9 changed: the mask lets the future leak.",
               t=t)
            + hint_suffix(tr(hint))
        )


@pytest.mark.points(1)
def test_blocked_keys_do_not_change_the_output(impl, device, seed):
    m = mha(impl, device)
    q, kv = torch.randn(2, 5, DIM, device=device), torch.randn(2, 9, DIM, device=device)
    keep = torch.ones(2, 1, 1, 9, dtype=torch.bool, device=device)
    keep[1, ..., 6:] = False  # padding: the last three keys of batch element 1
    changed = kv.clone()
    changed[1, 6:] = torch.randn(3, DIM, device=device)
    before, after = attend(m, q, kv, kv, mask=keep), attend(m, q, changed, changed, mask=keep)
    assert_close(after, before, atol=1e-5, name="output after changing only blocked keys",
                 hint="mask is a keep mask: set the scores where mask == 0 to -inf before the softmax.")


def identity_weights(dim, device):
    return {f"{name}.weight": torch.eye(dim, device=device) for name in ("wq", "wk", "wv", "wo")}


@pytest.mark.points(1)
@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "with a padding mask"])
def test_zero_queries_average_the_allowed_values(impl, device, seed, is_causal):
    m = mha(impl, device, is_causal=is_causal)
    weights = identity_weights(DIM, device)
    weights["wq.weight"] = torch.zeros(DIM, DIM, device=device)  # every score is 0: equal weights
    weights["wk.weight"] = torch.randn(DIM, DIM, device=device)
    load_weights(m, weights)
    x = torch.randn(2, 6, DIM, device=device)
    if is_causal:
        expected = x.cumsum(dim=1) / torch.arange(1, 7, device=device, dtype=x.dtype)[None, :, None]
        out, hint = attend(m, x, x, x), N_("equal scores give equal weights, so each output row is the mean of "
                                           "positions 0..t (T = 6 < max_seq_len).")
    else:
        keep = torch.ones(2, 1, 1, 6, dtype=torch.bool, device=device)
        keep[0, ..., 4:] = False
        expected = torch.stack([x[0, :4].mean(0).expand(6, DIM), x[1].mean(0).expand(6, DIM)])
        out, hint = attend(m, x, x, x, mask=keep), N_("equal scores give equal weights, so each output row is the "
                                                      "mean of the kept positions.")
    assert_close(out, expected, atol=1e-5, name="output with all scores 0 and wv = wo = I", hint=hint)


@pytest.mark.points(1)
@pytest.mark.parametrize("is_causal", [False, True], ids=["all positions", "causal"])
def test_course_notes_example_in_two_heads(impl, device, is_causal):
    m = mha(impl, device, dim=8, n_heads=2, max_seq_len=8, is_causal=is_causal)
    load_weights(m, identity_weights(8, device))
    tokens = torch.tensor(TOKENS, device=device)
    x = torch.cat([tokens, tokens.flip(0)], dim=-1)[None]  # head 0 sees the tokens, head 1 the same in reverse order
    out = attend(m, x, x, x)
    first, last = torch.tensor(FIRST_ROW, device=device) @ tokens, torch.tensor(LAST_ROW, device=device) @ tokens
    hint = N_("with identity weights head 0 attends over features 0-3 of each token and head 1 over features 4-7, "
              "each the notes' example with d_k = head_dim = 4. Split with .view(B, T, n_heads, head_dim)"
              ".transpose(1, 2), scale by sqrt(head_dim), and merge back with .transpose(1, 2).")
    # Position 4 sees all five tokens in both cases; causal position 0 sees only itself.
    expected_first = x[0, 0] if is_causal else torch.cat([first, last])
    assert_close(out[0, 0], expected_first, atol=3e-4, name="output at position 0", hint=hint)
    assert_close(out[0, 4], torch.cat([last, first]), atol=3e-4, name="output at position 4", hint=hint)


@pytest.mark.points(1)
def test_output_goes_through_wo(impl, device, seed):
    m = mha(impl, device)
    weights = identity_weights(DIM, device)
    weights["wo.weight"] = torch.zeros(DIM, DIM, device=device)
    load_weights(m, weights)
    x = torch.randn(2, 7, DIM, device=device)
    assert_close(attend(m, x, x, x), torch.zeros(2, 7, DIM, device=device), atol=0.0, name="output with wo = 0",
                 hint="the merged heads go through the output projection: return self.resid_dropout(self.wo(out)).")


@pytest.mark.points(1)
def test_batch_elements_are_independent(impl, device, seed):
    m = mha(impl, device, is_causal=True)
    x = torch.randn(3, 7, DIM, device=device)
    changed = x.clone()
    changed[1] = torch.randn(7, DIM, device=device)
    before, after = attend(m, x, x, x), attend(m, changed, changed, changed)
    assert_close(after[[0, 2]], before[[0, 2]], atol=1e-5, name="outputs of batch elements 0 and 2",
                 hint="only batch element 1 changed. Keep the batch dim first: view(B, T, n_heads, head_dim), "
                      "never a view that mixes B with T or the heads.")


@pytest.mark.hint_after("test_zero_queries_average_the_allowed_values[causal]")  # the same, without dropout
@pytest.mark.points(1)
def test_dropout_acts_on_the_weights_and_on_the_output(impl, device, seed):
    m = mha(impl, device, is_causal=True)
    weights = identity_weights(DIM, device)
    weights["wq.weight"] = torch.zeros(DIM, DIM, device=device)  # all scores 0: weight 1/(t+1) on 0..t
    load_weights(m, weights)
    on_weights = (torch.rand(2, N_HEADS, 6, 6, device=device) > 0.3).float() * 2.0  # fixed "dropout" patterns
    on_output = (torch.rand(2, 6, DIM, device=device) > 0.3).float() * 2.0
    impl.probes.swap(m, {"attn_dropout": impl.probes.FixedMask(on_weights),
                         "resid_dropout": impl.probes.FixedMask(on_output)})
    x = torch.randn(2, 6, DIM, device=device)
    uniform = torch.ones(6, 6, device=device).tril()
    uniform = uniform / uniform.sum(dim=-1, keepdim=True)  # (T, T): row t is 1/(t+1) on positions 0..t
    head_dim = DIM // N_HEADS
    heads = [(uniform * on_weights[:, h]) @ x[..., h * head_dim:(h + 1) * head_dim] for h in range(N_HEADS)]
    expected = torch.cat(heads, dim=-1) * on_output  # wv = wo = I
    hint = N_("the grader replaced attn_dropout by a fixed (B, n_heads, T_q, T_k) mask and resid_dropout by a fixed "
              "(B, T_q, dim) one: apply attn_dropout to the softmax weights and resid_dropout to the output of wo.")
    try:
        assert_close(attend(m, x, x, x, hint=hint), expected, atol=1e-5, name="output with fixed dropouts", hint=hint)
    except AssertionError as fixed:
        if not drops_the_weights_and_the_output_in_training(impl, device):
            raise fixed


def drops_the_weights_and_the_output_in_training(impl, device):
    """Whether, in training mode, every output is one that dropout on the attention weights and on the output gives.

    The fixed masks above only reach code that calls attn_dropout on (B, n_heads, T_q, T_k) weights; code that
    drops them its own way (F.scaled_dot_product_attention's dropout_p, an inner module, heads folded into the
    batch) is judged here on what it computes: 64 copies of 3 tokens, each output checked against every pattern.
    """
    m = mha(impl, device, is_causal=True, dropout=0.5).train()
    weights = identity_weights(DIM, device)
    weights["wq.weight"] = torch.zeros(DIM, DIM, device=device)  # all scores 0: weight 1/(t+1) on 0..t
    load_weights(m, weights)
    x = torch.randn(64, 3, DIM, device=device)
    return explained_by_weight_dropout(lambda: attend(m, x, x, x), x, uniform_causal(3), p=0.5, groups=N_HEADS,
                                       output_dropout=True)


DROPOUT_HINT = N_("self.attn_dropout and self.resid_dropout = nn.Dropout(args.dropout), the first on the attention "
                  "weights, the second on the output after wo.")


@pytest.mark.points(1)
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_dropout_drops_with_the_probability_it_was_given(impl, seed, p):
    for is_causal in (False, True):
        args = impl.config.ModelArgs(dim=DIM, n_heads=N_HEADS, dropout=p, max_seq_len=MAX_SEQ_LEN)
        m = impl.multi_head_attention.MultiHeadAttention(args, is_causal=is_causal)
        what = f"MultiHeadAttention(ModelArgs(dropout={p}), is_causal={is_causal})"
        try:
            expect_dropout("MultiHeadAttention", m, p, what=what,
                           hint="self.attn_dropout and self.resid_dropout = nn.Dropout(args.dropout), the first on "
                                "the attention weights, the second on the output after wo, each applied once.")
            expect_dropout("MultiHeadAttention", m, p, what=what, training=False,
                           hint="nn.Dropout does nothing in eval mode: use the modules, not F.dropout(..., "
                                "training=True).")
        except SubmissionFailure as failure:
            raise type(failure)(str(failure) + hint_suffix(tr(DROPOUT_HINT))) from None
