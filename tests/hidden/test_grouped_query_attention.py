"""Hidden tests for exercises/grouped_query_attention.py: the reference's goldens, multi-head attention, gradients.

The submission gets the reference's weights by name, so any difference is in the computation. Expected values are
float64: the reference's golden copy, or the first track's reference MultiHeadAttention (causal) holding the same
weights where there are as many key/value heads as query heads. Each tolerance comes from how far the float32
reference lands from its float64 golden on the same inputs.
"""

import pytest
import torch

from grader.testing import (
    SubmissionFailure,
    assert_close,
    backward,
    expect_structure,
    expect_tensor,
    float64,
    golden,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
)

NAMES = "call the layers wq, wk, wv and wo; wk and wv are nn.Linear(dim, n_kv_heads * head_dim, bias=False)"


def pair(impl, ref, device, *, dim, n_heads, n_kv_heads, dropout=0.0):
    """The reference module (trusted) and the submission's, holding the same weights, both in eval mode."""
    r = ref.grouped_query_attention.GroupedQueryAttention(
        ref.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=dropout), n_kv_heads)
    m = impl.grouped_query_attention.GroupedQueryAttention(
        impl.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=dropout), n_kv_heads)
    load_parameters(m, {name: p.detach() for name, p in r.named_parameters()}, name="GroupedQueryAttention",
                    names_hint=NAMES)
    return m.to(device).eval(), r.to(device).eval()


def attend(m, x, **kwargs):
    return expect_tensor(m(x, **kwargs), name="GroupedQueryAttention output")


def padding(batch, T, generator, device):
    """A padding keep mask (B, 1, 1, T): each batch element keeps its first 2..T keys."""
    lengths = torch.randint(2, T + 1, (batch, 1), generator=generator)
    return (torch.arange(T) < lengths).view(batch, 1, 1, T).to(device)


CASES = {  # dim, n_heads, n_kv_heads, batch, T, padded, dtype
    "8 query heads over 2 kv heads": (32, 8, 2, 2, 9, False, torch.float32),
    "8 query heads over 4 kv heads, padding mask": (32, 8, 4, 3, 6, True, torch.float32),
    "multi-query attention, 4 heads": (16, 4, 1, 2, 7, False, torch.float32),
    "multi-head attention, 4 heads, padding mask": (16, 4, 4, 2, 7, True, torch.float32),
    "one token": (16, 4, 2, 2, 1, False, torch.float32),
    "batch of one, float64, padding mask": (24, 6, 3, 1, 8, True, torch.float64),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("dim, n_heads, n_kv_heads, batch, T, padded, dtype", CASES.values(), ids=CASES.keys())
def test_matches_golden(impl, ref, device, seed, dim, n_heads, n_kv_heads, batch, T, padded, dtype):
    m, r = pair(impl, ref, device, dim=dim, n_heads=n_heads, n_kv_heads=n_kv_heads)
    m.to(dtype)
    x = torch.randn(batch, T, dim, device=device, dtype=dtype)
    mask = {"mask": padding(batch, T, torch.Generator().manual_seed(seed), device)} if padded else {}
    want = golden(r, x, **mask)
    atol = tolerance(r(x.float(), **mask), want)
    assert_close(attend(m, x, **mask), want.to(dtype), atol=atol, name="output",
                 hint="query head h reads kv head h // (n_heads // n_kv_heads); causal, and the keep mask on top.")


@pytest.mark.points(2)
@pytest.mark.parametrize("padded", [False, True], ids=["causal", "causal and padding mask"])
def test_as_many_kv_heads_as_query_heads_is_multi_head_attention(impl, ref, device, seed, padded):
    args = ref.config.ModelArgs(dim=16, n_heads=4, max_seq_len=16)
    mha = ref.multi_head_attention.MultiHeadAttention(args, is_causal=True).to(device).eval()
    m = impl.grouped_query_attention.GroupedQueryAttention(impl.config.ModelArgs(dim=16, n_heads=4), 4)
    load_parameters(m, {name: p.detach() for name, p in mha.named_parameters()}, name="GroupedQueryAttention",
                    names_hint=NAMES)
    m.to(device).eval()
    x = torch.randn(2, 9, 16, device=device)
    keep = padding(2, 9, torch.Generator().manual_seed(seed), device) if padded else None
    want = golden(mha, x, x, x, keep)
    atol = tolerance(mha(x, x, x, keep), want)
    assert_close(attend(m, x, **({"mask": keep} if padded else {})), want.float(), atol=atol,
                 name="output against the first track's MultiHeadAttention(args, is_causal=True) with the same weights",
                 hint="with n_kv_heads == n_heads nothing is shared: it is causal multi-head attention.")


@pytest.mark.points(2)
def test_every_parameter_gets_the_golden_gradient(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dim=24, n_heads=6, n_kv_heads=2)
    x = torch.randn(2, 7, 24, device=device)
    grad_output = torch.randn(2, 7, 24, device=device)
    with float64(r):
        want = backward(r, x.double().requires_grad_(True), grad_output=grad_output.double())
    ref32 = backward(r, x.clone().requires_grad_(True), grad_output=grad_output)
    got = backward(m, x.clone().requires_grad_(True), grad_output=grad_output)
    for name, grad64 in want.parameters.items():
        grad = got.parameters.get(name)
        assert grad is not None, tr("no gradient reached {name}: use it in forward, without .detach() or "
                                    "torch.no_grad()", name=name)
        assert_close(grad, grad64.float(), atol=tolerance(ref32.parameters[name], grad64),
                     name=tr("gradient of {name}", name=name))
    assert got.inputs[0] is not None, tr("no gradient reached the input {name}: do not detach it", name="x")
    assert_close(got.inputs[0], want.inputs[0].float(), atol=tolerance(ref32.inputs[0], want.inputs[0]),
                 name=tr("gradient of the input {name}", name="x"))


@pytest.mark.points(1)
@pytest.mark.parametrize("n_kv_heads", [1, 4], ids=["one kv head", "four kv heads"])
def test_default_model_args_give_the_reference_structure(impl, ref, n_kv_heads):
    expect_structure(
        impl.grouped_query_attention.GroupedQueryAttention(impl.config.ModelArgs(), n_kv_heads),
        ref.grouped_query_attention.GroupedQueryAttention(ref.config.ModelArgs(), n_kv_heads),
        what=f"GroupedQueryAttention(ModelArgs(), n_kv_heads={n_kv_heads})",
        hint="take every size from args and n_kv_heads: wk, wv = nn.Linear(dim, n_kv_heads * head_dim, bias=False).")


@pytest.mark.points(1)
@pytest.mark.parametrize("dim, n_heads, n_kv_heads", [(12, 5, 1), (32, 8, 3), (32, 8, 16)])
def test_uneven_heads_or_groups_are_refused(impl, dim, n_heads, n_kv_heads):
    module = f"GroupedQueryAttention(ModelArgs(dim={dim}, n_heads={n_heads}), n_kv_heads={n_kv_heads})"
    try:
        impl.grouped_query_attention.GroupedQueryAttention(impl.config.ModelArgs(dim=dim, n_heads=n_heads),
                                                           n_kv_heads)
    except SubmissionFailure as failure:
        assert failure.kind == "ValueError", tr("expected ValueError from {module}, got: {failure}", module=module,
                                                failure=failure)
    else:
        raise AssertionError(tr("{module} was built without complaint.", module=module) + hint_suffix(tr(
            "raise ValueError unless args.dim % args.n_heads == 0 and args.n_heads % n_kv_heads == 0.")))


@pytest.mark.points(1)
def test_training_mode_applies_dropout_and_eval_mode_none(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dim=16, n_heads=4, n_kv_heads=2, dropout=0.5)
    x = torch.randn(3, 6, 16, device=device)
    want = golden(r, x)
    assert_close(attend(m, x), want.float(), atol=tolerance(r(x), want), name="output in eval mode, dropout=0.5",
                 hint="dropout acts in training mode only: call self.attn_dropout and self.resid_dropout as modules.")
    m.train()
    assert not torch.equal(attend(m, x), attend(m, x)), tr(
        "with dropout=0.5 in training mode two calls on the same input gave the same output: apply self.attn_dropout "
        "and self.resid_dropout.")


@pytest.mark.points(2)
def test_kv_cache_bytes_at_random_sizes(impl, seed):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(5):
        n_layers, batch, seq_len, n_kv_heads, head_dim, per_value = (
            int(v) for v in torch.randint(1, 200, (6,), generator=generator))
        want = 2 * n_layers * batch * seq_len * n_kv_heads * head_dim * per_value
        got = impl.grouped_query_attention.kv_cache_bytes(n_layers, batch, seq_len, n_kv_heads, head_dim,
                                                           bytes_per_value=per_value)
        call = f"kv_cache_bytes({n_layers}, {batch}, {seq_len}, {n_kv_heads}, {head_dim}, bytes_per_value={per_value})"
        assert got == want and isinstance(got, int), tr(
            "{call} = {got}, expected {want} = 2 * n_layers * batch * seq_len * n_kv_heads * head_dim * "
            "bytes_per_value.", call=call, got=got, want=want)
