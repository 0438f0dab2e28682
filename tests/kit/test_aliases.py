"""A module reachable by two names is one module: `describe` lists its parameters under the contract's name,
weights loaded by that name are not zeroed through the other, and a FixedMask swapped in for `dropout` is the
one the module calls, whichever name it calls it by."""

from __future__ import annotations

import torch
from torch import nn

from grader.inside.shared import probes
from grader.judge.rates import expect_dropout
from grader.judge.structure import describe, load_parameters
from solutions import multi_head_attention, sublayers
from solutions.config import ModelArgs


class SequentialFirst(nn.Module):
    def __init__(self, d_model: int = 4, d_ff: int = 6, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))
        self.w1, self.dropout, self.w2 = self.net[0], self.net[2], self.net[3]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_describe_lists_an_aliased_parameter_once_under_its_contract_name():
    info = describe(SequentialFirst())
    assert sorted(info.parameters) == ["w1.bias", "w1.weight", "w2.bias", "w2.weight"]
    assert info.parameters["w1.weight"]["aliases"] == ["net.0.weight"]
    assert info.parameters["w1.weight"]["shape"] == [6, 4]
    assert describe(sublayers.FeedForward(4, 6)).parameters["w1.weight"]["aliases"] == []


def test_weights_loaded_by_one_name_are_not_zeroed_through_the_other():
    m, ref = SequentialFirst(), sublayers.FeedForward(4, 6)
    load_parameters(m, ref.state_dict(), name="FeedForward", names_hint="")
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(m(x), ref(x))


def test_an_extra_parameter_is_still_zeroed():
    m, ref = SequentialFirst(), sublayers.FeedForward(4, 6)
    m.extra = nn.Linear(4, 4)
    load_parameters(m, ref.state_dict(), name="FeedForward", names_hint="")
    assert bool((m.extra.weight == 0).all())


def test_swap_replaces_the_dropout_under_every_name():
    m, ref = SequentialFirst(), sublayers.FeedForward(4, 6)
    load_parameters(m, ref.state_dict(), name="FeedForward", names_hint="")
    keep = (torch.arange(2 * 3 * 6).view(2, 3, 6) % 3 != 0).float() * 1.5
    x = torch.randn(2, 3, 4)
    unmasked = m(x)
    probes.swap(m, {"dropout": probes.FixedMask(keep)})
    ref.dropout = probes.FixedMask(keep)
    torch.testing.assert_close(m(x), ref(x))
    assert not torch.allclose(m(x), unmasked)  # the mask acted: net.2 is the FixedMask too


def test_one_module_under_two_contract_names_gets_each_its_own_mask():
    m = multi_head_attention.MultiHeadAttention(ModelArgs(dim=8, n_heads=2, dropout=0.0, max_seq_len=4))
    m.resid_dropout = m.attn_dropout
    on_weights, on_output = probes.FixedMask(torch.ones(1)), probes.FixedMask(torch.zeros(1))
    probes.swap(m, {"attn_dropout": on_weights, "resid_dropout": on_output})
    assert m.attn_dropout is on_weights and m.resid_dropout is on_output


def test_tracing_loads_every_name_and_zeroes_only_extra_parameters():
    m = SequentialFirst()
    m.extra = nn.Parameter(torch.ones(3))
    expect_dropout("FeedForward", m, 0.0, what="FeedForward")
    assert bool((m.net[0].weight == m.w1.weight).all()) and not bool((m.w1.weight == 0).all())
    assert bool((m.extra == 0).all())


def test_a_module_list_keeps_its_contract_name_over_an_alias():
    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(2))
            self.first = self.layers[0]

    info = describe(Stack())
    assert "layers.0.weight" in info.parameters and info.parameters["layers.0.weight"]["aliases"] == ["first.weight"]


def test_a_module_dict_registered_first_gives_way_to_the_contract_names():
    class Projections(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.ModuleDict({"q": nn.Linear(4, 4, bias=False), "k": nn.Linear(4, 4, bias=False)})
            self.wq, self.wk = self.proj["q"], self.proj["k"]
            self.residuals = nn.ModuleList([nn.LayerNorm(4)])
            self.residual1 = self.residuals[0]

    assert sorted(describe(Projections()).parameters) == ["residual1.bias", "residual1.weight", "wk.weight",
                                                           "wq.weight"]
