"""Public tests for exercises/head_attention.py: names and shapes, causality, dropout, and known answers.

Run them with `grader check head_attention`. They need no reference solution: the expected values
are properties every causal head has, or answers worked out by hand from weights set to 0 and I.
"""

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_tensor,
    explained_by_weight_dropout,
    hint_suffix,
    load_parameters,
    tr,
    uniform_causal,
)

N_EMBD, HEAD_SIZE, BLOCK_SIZE = 16, 8, 12  # head_size != n_embd, so scaling by the wrong one shows

# The course notes' five 4-dimensional tokens; attending with q = k = v = TOKENS, the last token's
# weights over all five are printed there.
TOKENS = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0.5, 0.5, 0]]
LAST_ROW = [0.2374, 0.1440, 0.2374, 0.1440, 0.2374]


def head(impl, device, *, n_embd=N_EMBD, head_size=HEAD_SIZE, block_size=BLOCK_SIZE, dropout=0.0):
    return impl.head_attention.HeadAttention(n_embd, head_size, block_size, dropout=dropout).to(device).eval()


def load_weights(module, weights):
    """Load hand-made weights by name; the module keeps its own `tril`."""
    load_parameters(module, weights, name="HeadAttention",
                    names_hint=tr("call the layers key, query and value"), allow=("tril",))


def call(m, x, hint=""):
    try:
        return expect_tensor(m(x), name="HeadAttention output")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def keep_first_features(n_embd, head_size, device):
    """A (head_size, n_embd) weight that keeps the first head_size features of a token: [I | 0]."""
    return torch.eye(head_size, n_embd, device=device)


@pytest.mark.points(1)
@pytest.mark.parametrize("T", [5, BLOCK_SIZE], ids=["T < block_size", "T = block_size"])
def test_output_has_shape_batch_time_head_size(impl, device, seed, T):
    x = torch.randn(3, T, N_EMBD, device=device)
    out = call(head(impl, device), x)
    assert tuple(out.shape) == (3, T, HEAD_SIZE), (
        tr("output has shape {shape} for x of shape {x_shape}, expected {expected} = (B, T, head_size).",
           shape=tuple(out.shape), x_shape=(3, T, N_EMBD), expected=(3, T, HEAD_SIZE))
        + hint_suffix(tr("the (B, T, T) attention weights @ v (B, T, head_size) give (B, T, head_size)."))
    )


@pytest.mark.confirmed_by("test_course_notes_worked_example_scaled_by_head_size")
@pytest.mark.points(2)
def test_key_query_value_have_no_bias_and_tril_is_a_buffer(impl, device):
    m = head(impl, device)
    info = describe(m)
    expected = {f"{name}.weight": [HEAD_SIZE, N_EMBD] for name in ("key", "query", "value")}
    got = {name: p["shape"] for name, p in info.parameters.items()}
    assert "tril" not in got, tr(
        "tril is a parameter, so an optimizer would train it: use self.register_buffer('tril', ...)")
    assert got == expected, (
        tr("{module} has parameters {got}, expected {expected}.",
           module=f"HeadAttention({N_EMBD}, {HEAD_SIZE}, {BLOCK_SIZE})", got=got, expected=expected)
        + hint_suffix(tr("key, query, value = nn.Linear(n_embd, head_size, bias=False)."))
    )
    assert "tril" in info.buffers, tr("no buffer named tril (buffers: {names})",
                                      names=sorted(info.buffers) or tr("none"))
    shape = tuple(info.buffers["tril"]["shape"])
    assert shape == (BLOCK_SIZE, BLOCK_SIZE), tr("tril has shape {shape}, expected (block_size, block_size)",
                                                 shape=shape)
    assert_close(m.tril, torch.ones(BLOCK_SIZE, BLOCK_SIZE, device=device).tril(), atol=0.0, name="tril",
                 check_dtype=False, hint="ones on and below the diagonal, zeros above: torch.tril(torch.ones(...)).")


@pytest.mark.points(2)
def test_future_tokens_do_not_leak(impl, device, seed):
    m = head(impl, device)
    x = torch.randn(2, 10, N_EMBD, device=device)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, N_EMBD, device=device)
    before, after = call(m, x), call(m, changed)
    assert tuple(before.shape) == (2, 10, HEAD_SIZE), tr("output has shape {shape}, expected {expected}",
                                                         shape=tuple(before.shape), expected=(2, 10, HEAD_SIZE))
    leak = (after[:, :6] - before[:, :6]).abs().amax(dim=(0, 2)) > 1e-5
    if bool(leak.any()):
        t = int(torch.nonzero(leak)[0])
        raise AssertionError(
            tr("output at position {t} changed when only positions 6 to 9 changed: the mask lets the future leak.",
               t=t)
            + hint_suffix(tr("set the scores where self.tril[:T, :T] == 0 to -inf before the softmax."))
        )
    assert not torch.allclose(after[:, 6:], before[:, 6:]), tr(
        "changing positions 6 to 9 did not change their own outputs: each position must attend to itself.")


@pytest.mark.points(2)
def test_course_notes_worked_example_scaled_by_head_size(impl, device, seed):
    m = head(impl, device, n_embd=8, head_size=4, block_size=8)
    weight = keep_first_features(8, 4, device)
    load_weights(m, {"key.weight": weight, "query.weight": weight, "value.weight": weight})
    tokens = torch.tensor(TOKENS, device=device)
    x = torch.cat([tokens, torch.randn(5, 4, device=device)], dim=-1)[None]  # (1, 5, 8); only the tokens count
    out = call(m, x)
    hint = N_("with these weights q = k = v = the notes' tokens (head_size 4); the last token sees all five, so its "
              "weights are the notes' last row, whose scores are divided by sqrt(head_size) = 2.")
    assert_close(out[0, 0], tokens[0], atol=1e-5, name="output at position 0 (which sees only itself)", hint=hint)
    assert_close(out[0, 4], torch.tensor(LAST_ROW, device=device) @ tokens, atol=3e-4,
                 name="output at position 4", hint=hint)


@pytest.mark.points(1)
def test_zero_queries_average_the_past_values(impl, device, seed):
    m = head(impl, device)
    load_weights(m, {
        "query.weight": torch.zeros(HEAD_SIZE, N_EMBD, device=device),  # all scores 0: equal weights
        "key.weight": torch.randn(HEAD_SIZE, N_EMBD, device=device),
        "value.weight": keep_first_features(N_EMBD, HEAD_SIZE, device),
    })
    x = torch.randn(2, 6, N_EMBD, device=device)
    counts = torch.arange(1, 7, device=device, dtype=x.dtype)[None, :, None]
    expected = x[..., :HEAD_SIZE].cumsum(dim=1) / counts  # position t: the mean of positions 0..t
    assert_close(call(m, x), expected, atol=1e-5, name="output with all scores 0",
                 hint="with query.weight = 0 every score is 0, so position t outputs the plain mean of the values "
                      "v = self.value(x) at positions 0..t (value keeps the first head_size features here): weights "
                      "from the tril[:T, :T] mask and a softmax over the last dim (the keys), times v.")


@pytest.mark.points(1)
def test_dropout_only_while_training(impl, device, seed):
    m = head(impl, device, dropout=0.5)
    x = torch.randn(4, BLOCK_SIZE, N_EMBD, device=device)
    first, second = call(m, x), call(m, x)
    assert torch.equal(first, second), tr("in eval mode two calls on the same input differ: dropout must be off")
    m.train()
    dropped, dropped_again = call(m, x), call(m, x)
    assert not torch.equal(dropped, dropped_again) and not torch.equal(dropped, first), tr(
        "with dropout=0.5 in training mode the output never changed: apply self.dropout to the attention weights.")


@pytest.mark.hint_after("test_zero_queries_average_the_past_values")  # the same, without dropout
@pytest.mark.points(1)
def test_dropout_acts_on_the_attention_weights(impl, device, seed):
    m = head(impl, device)
    load_weights(m, {
        "query.weight": torch.zeros(HEAD_SIZE, N_EMBD, device=device),  # all scores 0: weight 1/(t+1) on 0..t
        "key.weight": torch.randn(HEAD_SIZE, N_EMBD, device=device),
        "value.weight": keep_first_features(N_EMBD, HEAD_SIZE, device),
    })
    keep = (torch.rand(2, 6, 6, device=device) > 0.3).float() * 2.0  # a fixed "dropout" of the (B, T, T) weights
    impl.probes.swap(m, {"dropout": impl.probes.FixedMask(keep)})
    x = torch.randn(2, 6, N_EMBD, device=device)
    weights = torch.ones(6, 6, device=device).tril()
    weights = weights / weights.sum(dim=-1, keepdim=True)  # (T, T): row t is 1/(t+1) on positions 0..t
    expected = (weights * keep) @ x[..., :HEAD_SIZE]
    hint = N_("the grader replaced self.dropout by a fixed mask of shape (B, T, T): apply self.dropout to the "
              "weights after the softmax and before @ v, not to the output.")
    try:
        assert_close(call(m, x, hint), expected, atol=1e-5, name="output with a fixed dropout on the weights",
                     hint=hint)
    except AssertionError as fixed:
        if not drops_the_weights_in_training(impl, device):
            raise fixed


def drops_the_weights_in_training(impl, device):
    """Whether, in training mode, every output is one that dropout on the attention weights gives.

    The fixed mask above only reaches code that calls self.dropout on the (B, T, T) weights; code that drops
    them its own way (F.scaled_dot_product_attention's dropout_p, say) is judged here on what it computes:
    64 copies of 3 tokens, each output checked against every dropout pattern.
    """
    m = head(impl, device, dropout=0.5).train()
    load_weights(m, {
        "query.weight": torch.zeros(HEAD_SIZE, N_EMBD, device=device),  # all scores 0: weight 1/(t+1) on 0..t
        "key.weight": torch.randn(HEAD_SIZE, N_EMBD, device=device),
        "value.weight": keep_first_features(N_EMBD, HEAD_SIZE, device),
    })
    x = torch.randn(64, 3, N_EMBD, device=device)
    return explained_by_weight_dropout(lambda: call(m, x), x[..., :HEAD_SIZE], uniform_causal(3), p=0.5,
                                       groups=1, output_dropout=False)


@pytest.mark.hint_after("test_dropout_only_while_training")  # its hint assumes dropout is off in eval mode
@pytest.mark.points(1)
def test_default_dropout_is_zero_in_training_mode(impl, device, seed):
    m = impl.head_attention.HeadAttention(N_EMBD, HEAD_SIZE, BLOCK_SIZE).to(device)
    x = torch.randn(3, 8, N_EMBD, device=device)
    evaluated = call(m.eval(), x)
    assert_close(call(m.train(), x), evaluated, atol=1e-6,
                 name="output in training mode, built without a dropout argument",
                 hint="the default is 0.0, so nothing is dropped even in training mode: HeadAttention(n_embd, "
                      "head_size, block_size, dropout=0.0): self.dropout = nn.Dropout(dropout), with the argument, "
                      "applied once to the attention weights.")
