"""`testing.expect_branch_dropped`, in process: each sublayer's output of an encoder or decoder layer is dropped
once by its residual (attention's after wo once more); a second dropout of the layer's own, on the attention output
or the feed-forward's, or one on the memory, is caught, and the reference passes at every seed tried."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grader.judge.structure import load_parameters
from grader.testing import branch_weights, expect_branch_dropped
from solutions import decoder, encoder

P, D_MODEL, N_HEADS = 0.3, 16, 4


class ExtraDropoutOnAttention(encoder.EncoderLayer):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.drop = nn.Dropout(P)

    def forward(self, x, mask=None):
        x = self.residual1(x, lambda y: self.drop(self.self_attn(y, y, y, mask)))
        return self.residual2(x, self.feed_forward)


class DropoutOnMemory(decoder.DecoderLayer):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.drop = nn.Dropout(P)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        return super().forward(x, self.drop(memory), src_mask, tgt_mask)


class FeedForwardDroppedTwice(decoder.DecoderLayer):
    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask))
        x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))
        return self.residual3(x, lambda y: self.residual3.dropout(self.feed_forward(y)))


CHAINED = {"self_attn": 2, "cross_attn": 2, "feed_forward": 1}


def contribution(layer: nn.Module, live: str) -> torch.Tensor:
    base = decoder.DecoderLayer if isinstance(layer, decoder.DecoderLayer) else encoder.EncoderLayer
    weights = branch_weights(dict(base(D_MODEL, N_HEADS, 32, P).named_parameters()), live)
    load_parameters(layer, weights, name="layer", names_hint="")
    x = torch.zeros(64, 8, D_MODEL)
    return layer.train()(x, torch.ones(64, 6, D_MODEL)) if base is decoder.DecoderLayer else layer.train()(x)


def check(layer: nn.Module, live: str) -> None:
    expect_branch_dropped(contribution(layer, live), groups=1 if live == "feed_forward" else N_HEADS, p=P,
                          chained=CHAINED[live], what=live, hint="")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("kind", "live"), [("encoder", "self_attn"), ("encoder", "feed_forward"),
                                            ("decoder", "self_attn"), ("decoder", "cross_attn"),
                                            ("decoder", "feed_forward")])
def test_the_reference_passes(kind: str, live: str, seed: int):
    torch.manual_seed(seed)
    layer = (decoder.DecoderLayer if kind == "decoder" else encoder.EncoderLayer)(D_MODEL, N_HEADS, 32, P)
    check(layer, live)


@pytest.mark.parametrize(("make", "live", "says"), [
    (lambda: ExtraDropoutOnAttention(D_MODEL, N_HEADS, 32, P), "self_attn", "in a row drop about"),
    (lambda: DropoutOnMemory(D_MODEL, N_HEADS, 32, P), "cross_attn", "came out different"),
    (lambda: FeedForwardDroppedTwice(D_MODEL, N_HEADS, 32, P), "feed_forward", "in a row drop about"),
], ids=["extra dropout on attention", "dropout on memory", "feed-forward dropped twice"])
def test_a_second_dropout_is_caught(make, live: str, says: str):
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=says):
        check(make(), live)


def test_a_layer_without_the_residuals_dropout_is_caught():
    torch.manual_seed(0)
    layer = encoder.EncoderLayer(D_MODEL, N_HEADS, 32, P)
    layer.residual2.dropout = nn.Identity()
    with pytest.raises(AssertionError, match="in a row drop about"):
        check(layer, "feed_forward")
