"""`testing.expect_dropout`, in process: every correct spelling of dropout passes at any p, in training and in
eval mode; a fixed p, a missing 1 / (1 - p), a dropout left out or one that acts in eval mode does not. And a
measurement's calls carry nothing the other tests' calls do not: its weights are drawn as theirs are, its inputs are
standard normal, its sublayers ordinary (test_rate_forgeries.py grades modules that look for the old marks)."""

from __future__ import annotations

import inspect
import math

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


class ResidualDroppingInEval(sublayers.ResidualConnection):
    """F.dropout(..., training=True) on the sublayer's output: drops in eval mode too."""

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        return x + F.dropout(sublayer(self.norm(x)), self.dropout.p, training=True)


@pytest.mark.parametrize("kind, module, site", [
    ("HeadAttention", HeadDroppingInEval(16, 8, 8, 0.3), "attention weights"),
    ("ResidualConnection", ResidualDroppingInEval(8, 0.3), "outputs of the sublayer"),
], ids=["head", "residual"])
def test_a_module_that_drops_in_eval_mode_too_is_told_so_when_measured_in_training_mode(kind, module, site):
    """Its rate in training mode is read against the same call in eval mode, whose values are then not the ones
    without dropout: what it is told is what that call showed."""
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match=rf"^{kind} in eval mode dropped \d+ of \d+ {site} \(\d+%\), where dropout "
                                             r"with p = 0.0 drops none"):
        expect_dropout(kind, module, 0.3, what=kind)


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


@pytest.mark.parametrize("is_causal", [False, True], ids=["not causal", "causal"])
def test_the_trace_counts_every_weight_and_output_of_attention_once(is_causal):
    torch.manual_seed(0)
    module = multi_head_attention.MultiHeadAttention(args(0.0), is_causal=is_causal)
    shapes = []
    module.register_forward_pre_hook(lambda _, inputs: shapes.append(inputs[0].shape) if module.training else None)
    trace = measure("MultiHeadAttention", module)
    weights, outputs = trace.sites
    assert (weights.dropped, outputs.dropped, trace.scale) == (0, 0, 1.0)
    # every key each of the 4 heads of each position attends, in every round
    assert weights.seen == sum(B * 4 * sum(t + 1 if is_causal else T for t in range(T)) for B, T, _ in shapes)
    assert outputs.seen == sum(B * T * dim for B, T, dim in shapes)
    assert len(parts("Transformer")) == 1 + 2 * 4 + 2 * 6


# --- what a measurement sends looks like what the other tests send -----------------------------------------------

KS = math.sqrt(-0.5 * math.log(1e-6 / 2))  # Kolmogorov-Smirnov's critical value at a false alarm of one in a million


def ks_distance(sample: torch.Tensor, cdf) -> float:
    """Kolmogorov-Smirnov's distance between a sample's empirical distribution and `cdf`."""
    x = sample.detach().double().flatten().sort().values
    f, n = cdf(x), len(x)
    rank = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(rank / n - f, f - (rank - 1) / n).max())


def expect_drawn_like(sample: torch.Tensor, cdf, what: str) -> None:
    distance, bound = ks_distance(sample, cdf), KS / math.sqrt(sample.numel())
    assert distance <= bound, f"{what}: {sample.numel()} values {distance:.3f} from their distribution ({bound:.3f})"


def uniform(bound: float):
    """nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the reference's and the module's own start."""
    return lambda x: ((x + bound) / (2 * bound)).clamp(0, 1)


def normal(mean: float = 0.0, std: float = 1.0):
    return lambda x: 0.5 * (1 + torch.erf((x - mean) / (std * math.sqrt(2))))


class Recorded:
    """A reference module that keeps what it is given: every load, and every call in training mode."""

    def record(self) -> Recorded:
        self.loads, self.calls = [], []
        return self

    def load_state_dict(self, state_dict, strict=True, assign=False):
        self.loads.append({name: value.detach().clone() for name, value in state_dict.items()})
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def forward(self, *args):
        if self.training:
            self.calls.append(args)
        return super().forward(*args)


class RecordedFeedForward(Recorded, sublayers.FeedForward):
    pass


class RecordedResidual(Recorded, sublayers.ResidualConnection):
    pass


class RecordedHead(Recorded, head_attention.HeadAttention):
    pass


class RecordedAttention(Recorded, multi_head_attention.MultiHeadAttention):
    pass


def measured(kind: str, make, seeds: int = 4) -> list[Recorded]:
    modules = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        modules.append(make().record())
        expect_dropout(kind, modules[-1], 0.3, what=kind)
    return modules


def loaded(modules: list[Recorded], name: str) -> torch.Tensor:
    return torch.cat([load[name].flatten() for m in modules for load in m.loads if name in load])


def inputs(modules: list[Recorded]) -> torch.Tensor:
    return torch.cat([call[0].flatten() for m in modules for call in m.calls])


def test_a_feed_forwards_measurement_loads_weights_drawn_as_nn_linear_draws_them():
    """Not a bias all in [0.5, 1.5], not a w2 whose columns fall into two orthogonal sets: the weights a fresh
    nn.Linear starts from, as the reference's that the golden tests load; standard normal inputs."""
    modules = measured("FeedForward", lambda: RecordedFeedForward(16, 32, 0.3))
    for name, fan_in in (("w1.weight", 16), ("w1.bias", 16), ("w2.weight", 32), ("w2.bias", 32)):
        expect_drawn_like(loaded(modules, name), uniform(fan_in ** -0.5), name)
    signs = loaded(modules, "w1.bias") > 0
    assert abs(signs.float().mean() - 0.5) <= 6 * 0.5 / math.sqrt(signs.numel()), "the hidden biases' signs"

    def cosines(w2: torch.Tensor) -> torch.Tensor:  # |cos| between every two columns
        unit = F.normalize(w2.double(), dim=0)
        return (unit.T @ unit).abs()[torch.ones(32, 32, dtype=torch.bool).triu(1)]

    seen = torch.cat([cosines(load["w2.weight"]) for m in modules for load in m.loads if "w2.weight" in load])
    ordinary = torch.cat([cosines(nn.Linear(32, 16).weight.detach()) for _ in range(50)])
    assert abs(seen.median() / ordinary.median() - 1) < 0.2, (seen.median(), ordinary.median())
    assert float((seen < 1e-4).double().mean()) < 0.01, "columns of w2 orthogonal to others"
    expect_drawn_like(inputs(modules), normal(), "inputs")


def test_a_residuals_measurement_hands_it_an_ordinary_sublayer():
    """torch.tanh, or an nn.Linear with nn.Linear's own weights, as the golden tests hand it: never one that returns a
    constant (it was torch.ones_like); the norm drawn as the hidden tests draw it; standard normal inputs."""
    modules = measured("ResidualConnection", lambda: RecordedResidual(16, 0.3), seeds=8)
    kinds = set()
    for m in modules:
        for x, sublayer in m.calls:
            kinds.add("tanh" if sublayer is torch.tanh else type(sublayer).__name__)
            if isinstance(sublayer, nn.Linear):
                expect_drawn_like(sublayer.weight, uniform(16 ** -0.5), "the nn.Linear sublayer's weight")
            with torch.no_grad():
                assert float(sublayer(m.norm(x)).std()) > 0.1, "a sublayer whose output is one constant"
    assert kinds == {"tanh", "Linear"}, kinds
    expect_drawn_like(loaded(modules, "norm.weight"), normal(1.0, 0.5), "norm.weight")
    expect_drawn_like(loaded(modules, "norm.bias"), normal(0.0, 0.5), "norm.bias")
    expect_drawn_like(inputs(modules), normal(), "inputs")


@pytest.mark.parametrize("kind", ["HeadAttention", "MultiHeadAttention"])
def test_attentions_measurement_gives_it_scores_as_large_as_the_golden_tests_do(kind):
    """Its query and key weights are a fresh nn.Linear's (they were scaled by 0.2: small scores), so its scores
    spread as they do under the reference's weights on the same inputs."""
    if kind == "HeadAttention":
        modules = measured(kind, lambda: RecordedHead(24, 6, 10, 0.3))
        names, fan_in, heads = ("query.weight", "key.weight"), 24, 1
    else:
        modules = measured(kind, lambda: RecordedAttention(args(0.3)))
        names, fan_in, heads = ("wq.weight", "wk.weight"), 16, 4
    for name in names:
        expect_drawn_like(loaded(modules, name), uniform(fan_in ** -0.5), name)

    def scores(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) -> torch.Tensor:
        q, k = (x @ w.T for w in (wq, wk))  # (B, T, heads * head_dim)
        q, k = (t.view(*t.shape[:2], heads, -1).transpose(1, 2) for t in (q, k))
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])

    seen, ordinary = [], []
    for m in modules:
        for load, call in zip(m.loads, m.calls, strict=True):  # a round: one load, one call in training mode
            reference = [nn.Linear(fan_in, load[name].shape[0], bias=False).weight.detach() for name in names]
            seen.append(scores(call[0], load[names[0]], load[names[1]]).flatten())
            ordinary.append(scores(call[0], *reference).flatten())
    ratio = float(torch.cat(seen).std() / torch.cat(ordinary).std())
    assert 0.75 < ratio < 1.33, f"the measurement's scores spread {ratio:.2f} times as much as the golden tests'"
    expect_drawn_like(inputs(modules), normal(), "inputs")
