"""`testing.expect_dropout`, in process: every correct spelling of dropout passes at any p, in training and in
eval mode; a fixed p, a missing 1 / (1 - p), a dropout left out or one that acts in eval mode does not."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.judge.rates import measure, parts
from grader.testing import expect_dropout
from solutions import config, encoder, head_attention, multi_head_attention, positional_encoding, sublayers, transformer


class FunctionalFeedForward(nn.Module):
    """F.dropout with the module's own flag, no nn.Dropout at all."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1, self.w2, self.p = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.dropout(torch.relu(self.w1(x)), self.p, self.training))


class UnscaledFeedForward(FunctionalFeedForward):
    """Drops with probability p but never scales the rest up."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.w1(x))
        return self.w2(h * (torch.rand_like(h) >= self.p) if self.training else h)


class AlwaysDroppingFeedForward(FunctionalFeedForward):
    """F.dropout(..., training=True): drops in eval mode too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.dropout(torch.relu(self.w1(x)), self.p, training=True))


class FunctionalHead(head_attention.HeadAttention):
    """F.dropout on the weights with the module's own flag, from a p kept as a number."""

    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0) -> None:
        super().__init__(n_embd, head_size, block_size)
        self.p = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
        wei = F.dropout(wei.masked_fill(self.tril[:T, :T] == 0, -1e9).softmax(-1), self.p, self.training)
        return wei @ self.value(x)


class HeadDroppingOutputs(head_attention.HeadAttention):
    """Drops the output, not the attention weights."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
        return self.dropout(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1) @ self.value(x))


class HeadDroppingInEval(head_attention.HeadAttention):
    """F.dropout(..., training=True) on the weights: drops in eval mode too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1)
        return F.dropout(wei, self.dropout.p, training=True) @ self.value(x)


class UnscaledPositions(positional_encoding.PositionalEncoding):
    """Drops x + pe with probability p but never scales the rest up."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.pe[:, : x.shape[1]]
        return y * (torch.rand_like(y) >= self.dropout.p) if self.training else y


class FusedAttention(nn.Module):
    """The fused kernel's dropout_p on the weights and one nn.Dropout, used for the output too."""

    def __init__(self, args: config.ModelArgs, is_causal: bool = False) -> None:
        super().__init__()
        self.n_heads, self.p = args.n_heads, args.dropout
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(args.dim, args.dim, bias=False) for _ in range(4))
        self.drop = nn.Dropout(args.dropout)

    def forward(self, q, k, v, mask=None):
        B, T, dim = q.shape
        split = [w(t).view(B, -1, self.n_heads, dim // self.n_heads).transpose(1, 2)
                 for w, t in ((self.wq, q), (self.wk, k), (self.wv, v))]
        out = F.scaled_dot_product_attention(*split, attn_mask=None if mask is None else mask.bool(),
                                             dropout_p=self.p if self.training else 0.0)
        return self.drop(self.wo(out.transpose(1, 2).reshape(B, T, dim)))


def args(p: float) -> config.ModelArgs:
    return config.ModelArgs(dim=16, n_heads=4, dropout=p, max_seq_len=16)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.3, 0.5])
@pytest.mark.parametrize("kind, make", [
    ("FeedForward", lambda p: sublayers.FeedForward(8, 12, p)),
    ("FeedForward", lambda p: FunctionalFeedForward(8, 12, p)),
    ("ResidualConnection", lambda p: sublayers.ResidualConnection(8, p)),
    ("MultiHeadAttention", lambda p: multi_head_attention.MultiHeadAttention(args(p), is_causal=True)),
    ("MultiHeadAttention", lambda p: FusedAttention(args(p))),
    ("Encoder", lambda p: encoder.Encoder(2, 8, 2, 12, p)),
    ("HeadAttention", lambda p: head_attention.HeadAttention(16, 8, 8, p)),
    ("HeadAttention", lambda p: FunctionalHead(16, 8, 8, p)),
    ("PositionalEncoding", lambda p: positional_encoding.PositionalEncoding(16, dropout=p)),
], ids=["FeedForward", "F.dropout", "ResidualConnection", "causal attention", "fused attention", "Encoder", "head",
        "head with F.dropout", "positions"])
def test_every_correct_spelling_passes_in_training_and_in_eval_mode(kind, make, p):
    torch.manual_seed(0)
    module = make(p)
    expect_dropout(kind, module, p, what=kind)
    expect_dropout(kind, module, p, what=kind, training=False)


@pytest.mark.parametrize("make, says", [
    (lambda p: sublayers.FeedForward(8, 12, 0.1), "dropped"),
    (lambda p: UnscaledFeedForward(8, 12, p), "scaled the values it kept by 1.0000"),
    (lambda p: sublayers.FeedForward(8, 12), "dropped 0 of"),
], ids=["fixed p", "no 1 / (1 - p)", "dropout left out"])
def test_a_wrong_probability_or_scale_fails(make, says):
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=says):
        expect_dropout("FeedForward", make(0.3), 0.3, what="FeedForward")


@pytest.mark.parametrize("kind, module, training, says", [
    ("HeadAttention", HeadDroppingOutputs(16, 8, 8, 0.3), True, "not value.x. weighted by attention weights"),
    ("HeadAttention", HeadDroppingInEval(16, 8, 8, 0.3), False, "in eval mode dropped"),
    ("PositionalEncoding", UnscaledPositions(16, dropout=0.3), True, "scaled the values it kept by 1.0000"),
    ("PositionalEncoding", positional_encoding.PositionalEncoding(16, dropout=0.1), True, "dropped"),
], ids=["head drops its output", "head drops in eval mode", "positions unscaled", "positions at a fixed p"])
def test_heads_and_positions_that_drop_wrongly_fail(kind, module, training, says):
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=says):
        expect_dropout(kind, module, 0.3, what=kind, training=training)


class PatternSpotter(sublayers.FeedForward):
    """Keeps p = 0.1 whatever it is given, but drops with the p it was given whenever it thinks it is traced:
    a helper of the kit on the call stack (the worker's old `probes.run_traced`), or weights in a tracing
    pattern (all of w1 zero, its bias all one)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__(d_model, d_ff, 0.1)
        self.asked = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        helper = any(frame.filename.endswith("probes.py") for frame in inspect.stack())
        pattern = bool((self.w1.weight == 0).all()) or bool((self.w1.bias == 1).all())
        p = self.asked if helper or pattern else 0.1
        return self.w2(F.dropout(torch.relu(self.w1(x)), p, self.training))


def test_a_head_whose_values_are_wrong_gets_no_claim_about_its_dropout():
    """v = self.key(x): its output is not a weighting of value(x), so nothing about its dropout can be read."""

    class KeyAsValue(head_attention.HeadAttention):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            T = x.shape[1]
            wei = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
            wei = self.dropout(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1))
            return wei @ self.key(x)

    torch.manual_seed(0)
    for training in (True, False):
        with pytest.raises(AssertionError) as failure:
            expect_dropout("HeadAttention", KeyAsValue(16, 8, 8, 0.3), 0.3, what="HeadAttention", training=training,
                           hint="call self.dropout on the weights")
        said = str(failure.value)
        assert "could not be measured" in said and "dropped" not in said and "Hint" not in said, said


def test_a_module_cannot_see_from_its_weights_or_the_stack_that_it_is_traced():
    """The tracing weights are random and the calls come straight from the test, as a golden test's do."""
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=r"dropped \d+ of \d+ hidden activations \(1?\d%\)"):
        expect_dropout("FeedForward", PatternSpotter(8, 12, 0.5), 0.5, what="FeedForward")


def test_a_whole_transformer_is_traced_part_by_part():
    torch.manual_seed(0)
    model = transformer.Transformer(11, 13, d_model=16, n_heads=2, d_ff=16, dropout=0.3, max_seq_len=16)
    expect_dropout("Transformer", model, 0.3, what="Transformer")
    expect_dropout("Transformer", model, 0.3, what="Transformer", training=False)


def test_dropout_in_eval_mode_fails():
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match="in eval mode dropped"):
        expect_dropout("FeedForward", AlwaysDroppingFeedForward(8, 12, 0.3), 0.3, what="FeedForward",
                       training=False)


def test_attention_without_the_output_dropout_fails():
    torch.manual_seed(0)
    module = multi_head_attention.MultiHeadAttention(args(0.3))
    module.resid_dropout = nn.Identity()
    with pytest.raises(AssertionError, match=r"dropped 0 of \d+ outputs"):
        expect_dropout("MultiHeadAttention", module, 0.3, what="MultiHeadAttention")


def test_a_transformer_whose_encoder_never_drops_names_the_part():
    torch.manual_seed(0)
    model = transformer.Transformer(11, 13, d_model=16, n_heads=2, d_ff=16, dropout=0.3, max_seq_len=16)
    model.encoder = encoder.Encoder(2, 16, 2, 16)
    with pytest.raises(AssertionError, match=r"^Transformer\.encoder\.layers\.0\.self_attn in training mode dropped 0"):
        expect_dropout("Transformer", model, 0.3, what="Transformer")


def test_the_trace_counts_every_weight_and_output_of_attention_once():
    torch.manual_seed(0)
    trace = measure("MultiHeadAttention", multi_head_attention.MultiHeadAttention(args(0.0)))
    weights, outputs = trace.sites
    assert (weights.dropped, outputs.dropped, trace.scale) == (0, 0, 1.0)
    assert weights.seen == 256 * 4 * (1 + 2) and outputs.seen == 256 * 2 * 16  # 256 rows of 2 positions
    assert len(parts("Transformer")) == 1 + 2 * 4 + 2 * 6
