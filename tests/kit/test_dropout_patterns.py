"""`testing.unexplained_by_weight_dropout`, in process: any correct way of dropping the attention weights passes,
the wrong placements do not."""

from __future__ import annotations

import torch

from grader.testing import unexplained_by_weight_dropout

P, B, T, F, HEADS = 0.25, 64, 4, 6, 2


def setup(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(B, T, F, generator=generator, dtype=torch.float64)
    weights = torch.softmax(torch.randn(T, T, generator=generator, dtype=torch.float64), dim=-1).tril()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return generator, values, weights


def keep(generator, *shape):
    return (torch.rand(*shape, generator=generator, dtype=torch.float64) >= P).double()


def heads_of(values):
    return values.view(B, T, HEADS, F // HEADS).transpose(1, 2)  # (B, h, T, f)


def merge(out):
    return out.transpose(1, 2).reshape(B, T, F)


def test_dropout_on_the_weights_of_each_head_is_explained():
    generator, values, weights = setup()
    dropped = weights * keep(generator, B, HEADS, T, T) / (1 - P)  # (B, h, T, T)
    out = merge(dropped @ heads_of(values))
    assert unexplained_by_weight_dropout(out, values, weights, p=P, groups=HEADS, output_dropout=False) is None


def test_heads_folded_into_the_batch_are_explained_too():
    generator, values, weights = setup(1)
    folded = heads_of(values).reshape(B * HEADS, T, F // HEADS)
    dropped = weights * keep(generator, B * HEADS, T, T) / (1 - P)
    out = merge(torch.bmm(dropped, folded).view(B, HEADS, T, F // HEADS))
    assert unexplained_by_weight_dropout(out, values, weights, p=P, groups=HEADS, output_dropout=False) is None


def test_dropout_on_the_output_or_values_or_without_scaling_is_not():
    generator, values, weights = setup(2)
    plain = merge(weights @ heads_of(values))
    on_output = plain * keep(generator, B, T, F) / (1 - P)
    on_values = merge(weights @ heads_of(values * keep(generator, B, T, F) / (1 - P)))
    unscaled = merge(weights * keep(generator, B, HEADS, T, T) @ heads_of(values))
    for wrong in (on_output, on_values, unscaled, plain):
        assert unexplained_by_weight_dropout(wrong, values, weights, p=P, groups=HEADS, output_dropout=False)
