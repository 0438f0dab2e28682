"""Hostile: at import, replaces the comparison functions a checker might use with always-pass versions."""

import math

import torch
import torch.testing


def _always_true(*args, **kwargs):
    return True


def _never_raise(*args, **kwargs):
    return None


def _all_close_elementwise(input, other, *args, **kwargs):
    return torch.ones(torch.broadcast_shapes(torch.as_tensor(input).shape, torch.as_tensor(other).shape), dtype=torch.bool)


torch.allclose = _always_true
torch.equal = _always_true
torch.isclose = _all_close_elementwise
torch.testing.assert_close = _never_raise
torch.testing.assert_allclose = _never_raise
torch.Tensor.__eq__ = _always_true
torch.Tensor.__ne__ = lambda self, other: False
torch.Tensor.allclose = _always_true
torch.Tensor.equal = _always_true
math.isclose = _always_true


def attention(query, key, value, dropout=None, mask=None):
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
