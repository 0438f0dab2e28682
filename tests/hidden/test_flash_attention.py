"""Hidden tests for exercises/flash_attention.py: agreement with a float64 golden of the reference, and gradients.

Each tolerance is derived from how far the float32 reference lands from the float64 golden on the same inputs.
Shapes, tile sizes and leading dims are drawn from the test's seed; the gradients through out and through lse
(what FlashAttention's backward needs) are compared with the reference's, autograd through its tiles.
"""

import pytest
import torch

from grader.testing import EPS32, N_, assert_close, backward, expect_tuple, golden, hint_suffix, tolerance, tr

LEADING = {"no leading dims": (), "batch": (3,), "batch and heads": (2, 3), "three leading dims": (2, 1, 3)}
TILES = N_("per query keep the running max m, the sum l of exp(s - m) and acc, the sum of exp(s - m) v; rescale l "
           "and acc by exp(m - m_new) when the max grows; out = acc / l and lse = m + log(l) after the last tile.")


def qkv(device, leading, *, queries, keys, d=8, dtype=torch.float32, scale=1.0):
    q = torch.randn(*leading, queries, d, dtype=dtype, device=device) * scale
    k = torch.randn(*leading, keys, d, dtype=dtype, device=device) * scale
    v = torch.randn(*leading, keys, d, dtype=dtype, device=device)
    return q, k, v


def check(impl, ref, q, k, v, *, hint=TILES, **kwargs):
    """The submission's (out, lse) against the float64 golden of the reference, within the reference's float32 error."""
    want_out, want_lse = golden(ref.flash_attention.flash_attention, q, k, v, **kwargs)
    ref_out, ref_lse = ref.flash_attention.flash_attention(q, k, v, **kwargs)
    out, lse = expect_tuple(impl.flash_attention.flash_attention(q, k, v, **kwargs), 2, name="flash_attention()")
    # Correct code may take exp(s - lse) where the reference takes exp(s - max): a few EPS32 of the largest score.
    largest = (q.double() @ k.double().transpose(-2, -1)).abs().max().item() / q.size(-1) ** 0.5
    floor = 4 * EPS32 * largest
    assert_close(out, want_out.to(q.dtype), atol=max(tolerance(ref_out, want_out), floor * v.abs().max().item()),
                 name="out", hint=hint)
    assert_close(lse, want_lse.to(q.dtype), atol=max(tolerance(ref_lse, want_lse), floor), name="lse", hint=hint)


@pytest.mark.points(2)
@pytest.mark.parametrize("leading", LEADING.values(), ids=LEADING.keys())
def test_matches_golden_at_random_shapes_and_tiles(impl, ref, device, seed, leading):
    draw = torch.Generator().manual_seed(seed)
    queries, keys = (int(n) for n in torch.randint(1, 90, (2,), generator=draw))
    block_size = int(torch.randint(1, 40, (1,), generator=draw))
    check(impl, ref, *qkv(device, leading, queries=queries, keys=keys), block_size=block_size)


@pytest.mark.points(2)
@pytest.mark.hint_after("test_matches_golden_at_random_shapes_and_tiles")  # its hint assumes the plain case is right
@pytest.mark.parametrize("leading", [(), (2, 3)], ids=["no leading dims", "batch and heads"])
def test_causal_matches_golden_at_random_lengths_and_tiles(impl, ref, device, seed, leading):
    draw = torch.Generator().manual_seed(seed)
    length = int(torch.randint(2, 90, (1,), generator=draw))
    block_size = int(torch.randint(1, 40, (1,), generator=draw))
    check(impl, ref, *qkv(device, leading, queries=length, keys=length), causal=True, block_size=block_size,
          hint=N_("key j is kept for query i when j <= i, i and j the global positions (the tile's offset plus the "
                  "index inside it)."))


@pytest.mark.points(1)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_float64_matches_golden(impl, ref, device, seed, causal):
    check(impl, ref, *qkv(device, (2,), queries=33, keys=33, dtype=torch.float64), causal=causal, block_size=8)


@pytest.mark.points(1)
def test_default_block_size_over_several_tiles(impl, ref, device, seed):
    q, k, v = qkv(device, (2,), queries=150, keys=200)
    want_out, want_lse = golden(ref.flash_attention.flash_attention, q, k, v)
    ref_out, ref_lse = ref.flash_attention.flash_attention(q, k, v)
    out, lse = expect_tuple(impl.flash_attention.flash_attention(q, k, v), 2, name="flash_attention()")
    assert_close(out, want_out.float(), atol=tolerance(ref_out, want_out), name="out with the default block_size",
                 hint=N_("block_size defaults to 64."))
    assert_close(lse, want_lse.float(), atol=tolerance(ref_lse, want_lse), name="lse with the default block_size")
    # The output is exact at any tile size up to rounding, and the rounding is the tiling's: the same tiles, called
    # twice, give the same bits, other tiles other bits in the last place.
    tiled = expect_tuple(impl.flash_attention.flash_attention(q, k, v, block_size=64), 2,
                         name="flash_attention(q, k, v, block_size=64)")
    same = all(isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
               for a, b in zip((out, lse), tiled, strict=True))
    assert same, (
        tr("flash_attention(q, k, v) and flash_attention(q, k, v, block_size=64) give different bits: both are right "
           "to rounding, but the same tiles round alike, so the default tiles are not 64 keys.")
        + hint_suffix(tr("block_size defaults to 64."))
    )


@pytest.mark.points(1)
@pytest.mark.parametrize(("queries", "keys", "causal"), [(1, 1, False), (1, 30, False), (1, 1, True), (30, 1, False)],
                         ids=["one query, one key", "one query", "causal, one position", "one key"])
def test_single_queries_and_keys(impl, ref, device, seed, queries, keys, causal):
    check(impl, ref, *qkv(device, (2,), queries=queries, keys=keys), causal=causal, block_size=8)


@pytest.mark.points(1)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_large_scores_match_golden(impl, ref, device, seed, causal):
    check(impl, ref, *qkv(device, (2,), queries=24, keys=24, scale=12.0), causal=causal, block_size=8,
          hint=N_("subtract the running max before exp(): exp(s - m_new), never exp(s) alone, which overflows."))


@pytest.mark.points(2)
@pytest.mark.parametrize(("index", "causal"), [(0, False), (1, False), (0, True), (1, True)],
                         ids=["through out", "through lse", "through out, causal", "through lse, causal"])
def test_gradients_match_golden(impl, ref, device, seed, index, causal):
    q, k, v = (t.requires_grad_(True) for t in qkv(device, (2,), queries=20, keys=20))
    grad_output = torch.randn(2, 20, 8, device=device) if index == 0 else torch.randn(2, 20, device=device)
    kwargs = {"causal": causal, "block_size": 6}
    golden_grads = backward(ref.flash_attention.flash_attention,
                            *(t.detach().double().requires_grad_(True) for t in (q, k, v)),
                            grad_output=grad_output.double(), output_index=index, **kwargs).inputs
    ref_grads = backward(ref.flash_attention.flash_attention, q, k, v, grad_output=grad_output, output_index=index,
                         **kwargs).inputs
    grads = backward(impl.flash_attention.flash_attention, q, k, v, grad_output=grad_output, output_index=index,
                     **kwargs).inputs
    what = "out" if index == 0 else "lse"
    for name, got, want, ref_got in zip(("q", "k", "v"), grads, golden_grads, ref_grads, strict=True):
        if name == "v" and index == 1:
            continue  # lse does not depend on v
        assert got is not None, tr(
            "no gradient reached {name} through {what}: keep the computation in torch, without .detach() or "
            "torch.no_grad()", name=name, what=what)
        assert_close(got, want.float(), atol=tolerance(ref_got, want),
                     name=tr("gradient of {name} through {what}", name=name, what=what),
                     hint=N_("autograd through the tiles is enough: keep every step in torch, out of place."))
