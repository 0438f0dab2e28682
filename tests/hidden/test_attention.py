"""Hidden tests for exercises/attention.py: agreement with a float64 golden of the reference.

Each tolerance is derived from how far the float32 reference lands from the float64 golden on the
same inputs, so any correct float32 computation passes and real mistakes (off by orders more) fail.
"""

import pytest
import torch

from grader.testing import (
    N_,
    assert_close,
    backward,
    expect_tuple,
    golden,
    random_keep_mask,
    tolerance,
    tr,
)

LEADING = {"no batch dims": (), "batch": (3,), "batch and heads": (2, 3), "three leading dims": (2, 1, 3)}


def qkv(device, leading=(2,), *, queries=12, keys=16, d_k=8, d_v=5, scale=1.0, dtype=torch.float32):
    q = torch.randn(*leading, queries, d_k, dtype=dtype, device=device) * scale
    k = torch.randn(*leading, keys, d_k, dtype=dtype, device=device) * scale
    v = torch.randn(*leading, keys, d_v, dtype=dtype, device=device)
    return q, k, v


def check(impl, ref, *args, hint="", **kwargs):
    """Compare the submission's (output, p_attn) with the float64 golden of the reference."""
    expected_out, expected_p = golden(ref.attention.attention, *args, **kwargs)
    ref_out, ref_p = ref.attention.attention(*args, **kwargs)
    output, p_attn = expect_tuple(impl.attention.attention(*args, **kwargs), 2, name="attention()")
    dtype = args[0].dtype
    assert_close(p_attn, expected_p.to(dtype), atol=tolerance(ref_p, expected_p), name="p_attn", hint=hint)
    assert_close(output, expected_out.to(dtype), atol=tolerance(ref_out, expected_out), name="output", hint=hint)


@pytest.mark.points(1)
@pytest.mark.parametrize("leading", LEADING.values(), ids=LEADING.keys())
def test_matches_golden_on_non_square_inputs(impl, ref, device, seed, leading):
    check(impl, ref, *qkv(device, leading),
          hint=tr("scores = query @ key.transpose(-2, -1) / sqrt(d_k), with d_k = query.size(-1)."))


KEEP_MASKS = {
    "bool, full shape": lambda g, d: random_keep_mask((2, 3, 12, 16), generator=g, device=d),
    "0/1 floats, one (L_q, L_k) for all": lambda g, d: random_keep_mask((12, 16), generator=g, device=d).float(),
    "padding, (B, 1, 1, L_k)": lambda g, d: random_keep_mask((2, 1, 1, 16), p_keep=0.6, generator=g, device=d),
    "causal": lambda g, d: torch.ones(12, 16, device=d).tril().bool(),
}


@pytest.mark.hint_after("test_matches_golden_on_non_square_inputs")  # its hint assumes the plain case is right
@pytest.mark.points(1)
@pytest.mark.parametrize("make_mask", KEEP_MASKS.values(), ids=KEEP_MASKS.keys())
def test_keep_mask_matches_golden(impl, ref, device, seed, make_mask):
    mask = make_mask(torch.Generator().manual_seed(seed), device)
    check(impl, ref, *qkv(device, (2, 3)), mask=mask,
          hint="mask is a keep mask (nonzero = may attend): set scores where mask == 0 to -inf before softmax.")


@pytest.mark.hint_after("test_matches_golden_on_non_square_inputs")  # its hint assumes the plain case is right
@pytest.mark.points(2)
def test_dropout_is_applied_to_the_weights(impl, ref, device, seed):
    q, k, v = qkv(device, (2,))
    keep = (torch.rand(2, 12, 16, device=device) > 0.3).float() * 2.0  # a fixed "dropout" pattern
    expected_out, expected_p = golden(ref.attention.attention, q, k, v, dropout=ref.probes.FixedMask(keep.double()))
    ref_out, ref_p = ref.attention.attention(q, k, v, dropout=ref.probes.FixedMask(keep))
    output, p_attn = expect_tuple(
        impl.attention.attention(q, k, v, dropout=impl.probes.FixedMask(keep)), 2, name="attention()"
    )
    hint = N_("apply dropout to p_attn (after softmax), use the dropped weights for the output, and return them.")
    assert_close(p_attn, expected_p.float(), atol=tolerance(ref_p, expected_p), name="p_attn with dropout", hint=hint)
    assert_close(output, expected_out.float(), atol=tolerance(ref_out, expected_out), name="output with dropout",
                 hint=hint)


@pytest.mark.points(2)
def test_gradients_match_golden(impl, ref, device, seed):
    q, k, v = (t.requires_grad_(True) for t in qkv(device, (2,)))
    grad_output = torch.randn(2, 12, 5, device=device)
    golden_grads = backward(ref.attention.attention, *(t.detach().double().requires_grad_(True) for t in (q, k, v)),
                            grad_output=grad_output.double(), output_index=0).inputs
    ref_grads = backward(ref.attention.attention, q, k, v, grad_output=grad_output, output_index=0).inputs
    grads = backward(impl.attention.attention, q, k, v, grad_output=grad_output, output_index=0).inputs
    for name, got, want, ref_got in zip(("query", "key", "value"), grads, golden_grads, ref_grads, strict=True):
        assert got is not None, tr("no gradient reached {name}: keep the computation in torch, without .detach()",
                                   name=name)
        assert_close(got, want.float(), atol=tolerance(ref_got, want), name=tr("gradient of {name}", name=name))


@pytest.mark.points(1)
def test_a_single_key_gets_all_the_weight(impl, device, seed):
    q, k, v = qkv(device, (2,), keys=1)
    output, p_attn = expect_tuple(impl.attention.attention(q, k, v), 2, name="attention()")
    assert_close(p_attn, torch.ones(2, 12, 1, device=device), atol=1e-6, name="p_attn with one key")
    assert_close(output, v.expand(2, 12, 5), atol=1e-6, name="output with one key")

