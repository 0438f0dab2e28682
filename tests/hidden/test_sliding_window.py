"""Hidden tests for exercises/sliding_window.py: random sizes, the whole sliding-window attention against the
reference's float64 golden (padded rows that see no key included), gradients, and the cache at random chunks."""

import pytest
import torch

from grader.testing import assert_close, backward, expect_tensor, expect_tuple, golden, tolerance, tr


@pytest.mark.points(1)
def test_mask_at_random_sizes(impl, ref, seed):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(4):
        T, window = (int(n) for n in torch.randint(1, 12, (2,), generator=generator))
        got = expect_tensor(impl.sliding_window.sliding_window_mask(T, window), name="sliding_window_mask")
        want = ref.sliding_window.sliding_window_mask(T, window)
        assert tuple(got.shape) == (T, T) and torch.equal(got.bool(), want), tr(
            "sliding_window_mask({T}, {window}) differs from j <= i and i - j < window.", T=T, window=window)


def sliding(sw, q, k, v, window, key_padding):
    return sw.masked_attention(q, k, v, sw.combine_masks(sw.sliding_window_mask(q.shape[-2], window), key_padding))


def inputs(device, dtype=torch.float32):
    q, k, v = (torch.randn(3, 2, 8, 6, device=device, dtype=dtype) for _ in range(3))
    key_padding = torch.ones(3, 8, dtype=torch.bool, device=device)
    key_padding[1, :3] = False  # left padding: with a window of 2, queries 0..2 of element 1 see no real key
    key_padding[2, 6:] = False
    return q, k, v, key_padding


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_sliding_window_attention_with_padding_matches_golden(impl, ref, device, seed, dtype):
    q, k, v, key_padding = inputs(device, dtype)

    def reference(q, k, v):
        return sliding(ref.sliding_window, q, k, v, 2, key_padding)

    want = golden(reference, q, k, v)
    got = expect_tensor(sliding(impl.sliding_window, q, k, v, 2, key_padding), name="masked_attention output")
    assert_close(got, want.to(dtype), atol=tolerance(reference(q.float(), k.float(), v.float()), want),
                 name="sliding-window attention (window 2) with left and right padding",
                 hint="a query whose window holds only padding gets zeros; the others attend over their kept keys.")


@pytest.mark.points(2)
def test_gradients_match_golden(impl, ref, device, seed):
    q, k, v, key_padding = inputs(device)
    keep = ref.sliding_window.combine_masks(ref.sliding_window.sliding_window_mask(8, 2), key_padding)
    grad_output = torch.randn(3, 2, 8, 6, device=device)

    def leaves(dtype):
        return [t.detach().to(dtype).requires_grad_(True) for t in (q, k, v)]

    want = backward(ref.sliding_window.masked_attention, *leaves(torch.float64), keep, grad_output=grad_output.double())
    ref32 = backward(ref.sliding_window.masked_attention, *leaves(torch.float32), keep, grad_output=grad_output)
    got = backward(impl.sliding_window.masked_attention, *leaves(torch.float32), keep, grad_output=grad_output)
    for name, grad, grad64, grad32 in zip("qkv", got.inputs, want.inputs, ref32.inputs, strict=True):
        assert grad is not None, tr("no gradient reached the input {name}: do not detach it", name=name)
        assert_close(grad, grad64.float(), atol=tolerance(grad32, grad64), name=tr("gradient of the input {name}",
                                                                                  name=name))


@pytest.mark.points(1)
def test_rolling_cache_at_random_chunks(impl, device, seed):
    generator = torch.Generator().manual_seed(seed)
    window = int(torch.randint(2, 6, (1,), generator=generator))
    cache, seen = impl.sliding_window.RollingKVCache(window), []
    for _ in range(5):
        count = int(torch.randint(1, 2 * window, (1,), generator=generator))
        k, v = torch.randn(2, 3, count, 4, device=device), torch.randn(2, 3, count, 4, device=device)
        seen.append((k, v))
        got_k, got_v = expect_tuple(cache.update(k, v), 2, name="RollingKVCache.update")
        all_k, all_v = (torch.cat([pair[i] for pair in seen], dim=2) for i in (0, 1))
        assert_close(expect_tensor(got_k, name="keys returned"), all_k[:, :, -window:], atol=0.0,
                     name=tr("keys returned after {count} positions, window {window}", count=all_k.shape[2],
                             window=window), hint="return the last min(window, seen) positions, oldest first.")
        assert_close(expect_tensor(got_v, name="values returned"), all_v[:, :, -window:], atol=0.0,
                     name=tr("values returned after {count} positions, window {window}", count=all_k.shape[2],
                             window=window), hint="return the last min(window, seen) positions, oldest first.")
