"""Public tests for exercises/grouped_query_attention.py: shapes, the groups, causality and the KV cache's size.

Run them with `grader check grouped_query_attention`. They need no reference solution: the expected values
come from grouped-query attention written the long way in float64 (one query head at a time, each with the
slices of wk and wv of its key/value head), from weights made so that each head's output names the key/value
head it read, or from the KV cache's formula.
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    SubmissionFailure,
    assert_close,
    describe,
    expect_tensor,
    expect_weights_and_output_dropped,
    hint_suffix,
    load_parameters,
    tolerance,
    tr,
)

DIM, N_HEADS = 24, 6
HEAD_DIM = DIM // N_HEADS
WEIGHTS = ("wq", "wk", "wv", "wo")


def gqa(impl, device, *, n_kv_heads, dim=DIM, n_heads=N_HEADS, dropout=0.0):
    args = impl.config.ModelArgs(dim=dim, n_heads=n_heads, dropout=dropout, max_seq_len=16)
    return impl.grouped_query_attention.GroupedQueryAttention(args, n_kv_heads).to(device).eval()


def draw_weights(n_kv_heads, device, *, dim=DIM, n_heads=N_HEADS):
    kv = n_kv_heads * (dim // n_heads)
    shapes = {"wq": (dim, dim), "wk": (kv, dim), "wv": (kv, dim), "wo": (dim, dim)}
    return {f"{name}.weight": torch.randn(*shape, device=device) / math.sqrt(shape[1])
            for name, shape in shapes.items()}


def load_weights(m, weights):
    try:
        load_parameters(m, weights, name="GroupedQueryAttention", names_hint=tr(
            "call the layers wq, wk, wv and wo; wk and wv are nn.Linear(dim, n_kv_heads * head_dim, bias=False)"))
    except SubmissionFailure as failure:  # weights of the contract's shapes that do not fit
        raise type(failure)(str(failure) + hint_suffix(tr(
            "the grader loads weights of the contract's shapes: wk, wv = nn.Linear(dim, n_kv_heads * head_dim, "
            "bias=False), wq and wo nn.Linear(dim, dim, bias=False)."))) from None


def attend(m, x, **kwargs):
    return expect_tensor(m(x, **kwargs), name="GroupedQueryAttention output")


def grouped_by_hand(weights, x, n_heads, n_kv_heads, keep=None, *, dtype=torch.float64):
    """Grouped-query attention the long way, in `dtype`: query head h uses rows [h*hd, (h+1)*hd) of wq and the
    columns of wo in the same range, and reads key/value head j = h // (n_heads // n_kv_heads), rows
    [j*hd, (j+1)*hd) of wk and wv; causal, and `keep` (B, 1, 1, T) on top."""
    wq, wk, wv, wo = (weights[f"{name}.weight"].to(dtype) for name in WEIGHTS)
    x = x.to(dtype)
    B, T, dim = x.shape
    hd, group = dim // n_heads, n_heads // n_kv_heads
    allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril().expand(B, T, T)
    if keep is not None:
        allowed = allowed & keep.view(B, 1, T).bool()
    out = 0
    for h in range(n_heads):
        rows, kv = slice(h * hd, (h + 1) * hd), slice((h // group) * hd, (h // group + 1) * hd)
        q, k, v = x @ wq[rows].T, x @ wk[kv].T, x @ wv[kv].T  # (B, T, hd)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(~allowed, float("-inf"))  # (B, T, T)
        out = out + (scores.softmax(dim=-1) @ v) @ wo[:, rows].T  # (B, T, dim)
    return out


def check_by_hand(m, weights, x, n_kv_heads, keep=None, *, name, hint):
    want = grouped_by_hand(weights, x, N_HEADS, n_kv_heads, keep)
    atol = tolerance(grouped_by_hand(weights, x, N_HEADS, n_kv_heads, keep, dtype=torch.float32), want)
    mask = {} if keep is None else {"mask": keep}
    assert_close(attend(m, x, **mask), want.to(x.dtype), atol=atol, name=name, hint=hint)


# --- structure -----------------------------------------------------------------------------------


@pytest.mark.points(1)
@pytest.mark.parametrize("n_kv_heads", [1, 2, 6], ids=["one kv head (MQA)", "two kv heads", "six kv heads (MHA)"])
def test_key_and_value_projections_have_n_kv_heads_heads(impl, device, n_kv_heads):
    info = describe(gqa(impl, device, n_kv_heads=n_kv_heads))
    got = {name: p["shape"] for name, p in info.parameters.items()}
    kv = n_kv_heads * HEAD_DIM
    expected = {"wq.weight": [DIM, DIM], "wk.weight": [kv, DIM], "wv.weight": [kv, DIM], "wo.weight": [DIM, DIM]}
    count = sum(math.prod(shape) for shape in got.values())
    assert got == expected, (
        tr("{module} has parameters {got} ({count} numbers), expected {expected} ({want} numbers: 2 * dim * dim + 2 * "
           "dim * n_kv_heads * head_dim).", module=f"GroupedQueryAttention(dim={DIM}, n_heads={N_HEADS}, "
           f"n_kv_heads={n_kv_heads})", got=got, count=count, expected=expected,
           want=2 * DIM * DIM + 2 * DIM * kv)
        + hint_suffix(tr("keys and values have n_kv_heads heads: wk, wv = nn.Linear(dim, n_kv_heads * head_dim, "
                         "bias=False); wq and wo stay nn.Linear(dim, dim, bias=False)."))
    )


@pytest.mark.points(1)
@pytest.mark.parametrize("dim, n_heads, n_kv_heads", [(24, 4, 3), (24, 6, 4), (10, 4, 2)],
                         ids=["4 query heads, 3 kv heads", "6 query heads, 4 kv heads", "dim 10, 4 heads"])
def test_uneven_heads_or_groups_are_refused(impl, dim, n_heads, n_kv_heads):
    module = f"GroupedQueryAttention(ModelArgs(dim={dim}, n_heads={n_heads}), n_kv_heads={n_kv_heads})"
    try:
        gqa(impl, "cpu", dim=dim, n_heads=n_heads, n_kv_heads=n_kv_heads)
    except SubmissionFailure as failure:
        assert failure.kind == "ValueError", tr("expected ValueError from {module}, got: {failure}", module=module,
                                                failure=failure)
    else:
        hint = (N_("raise ValueError when args.dim % args.n_heads != 0.") if dim % n_heads
                else N_("raise ValueError when args.n_heads % n_kv_heads != 0: the query heads must split into equal "
                        "groups."))
        raise AssertionError(tr("{module} was built without complaint.", module=module) + hint_suffix(tr(hint)))


# --- what it computes ----------------------------------------------------------------------------


CASES = {  # n_kv_heads, dtype, hint
    "n_kv_heads == n_heads: multi-head attention": (6, torch.float32, N_(
        "with as many kv heads as query heads nothing is shared: this is causal multi-head attention. Split with "
        ".view(B, T, n_heads, head_dim).transpose(1, 2), scale by sqrt(head_dim), block j > i, merge with "
        ".transpose(1, 2).contiguous().view(B, T, dim), then wo.")),
    "two kv heads, groups of three": (2, torch.float32, N_(
        "split the keys and values with .view(B, T, n_kv_heads, head_dim).transpose(1, 2), then repeat each kv head "
        "n_heads // n_kv_heads times next to itself.")),
    "n_kv_heads == 1: multi-query attention": (1, torch.float32, N_(
        "with one kv head every query head reads the same keys and values.")),
    "two kv heads, float64": (2, torch.float64, N_(
        "the same in float64: if only this case fails, look for a hard-coded float32 (.float(), "
        "dtype=torch.float32).")),
}
MHA = "test_matches_grouped_attention_by_hand[n_kv_heads == n_heads: multi-head attention]"
GROUPS = "test_matches_grouped_attention_by_hand[two kv heads, groups of three]"


@pytest.mark.points(1)
@pytest.mark.parametrize("n_kv_heads, dtype, hint", [
    # Each case's hint is about its twist: it assumes multi-head attention (and, in float64, the groups) right.
    pytest.param(*case, id=name, marks=() if name.startswith("n_kv_heads == n_heads") else
                 pytest.mark.hint_after(MHA, GROUPS) if dtype == torch.float64 else pytest.mark.hint_after(MHA))
    for name, case in CASES.items() for dtype in case[1:2]])
def test_matches_grouped_attention_by_hand(impl, device, seed, n_kv_heads, dtype, hint):
    m = gqa(impl, device, n_kv_heads=n_kv_heads)
    weights = draw_weights(n_kv_heads, device)
    load_weights(m, weights)
    m.to(dtype)
    x = torch.randn(2, 7, DIM, device=device, dtype=dtype)
    check_by_hand(m, weights, x, n_kv_heads, name="output against grouped-query attention by hand", hint=hint)


def naming_weights(n_kv_heads, device):
    """wv makes every value of kv head j equal to j + 1 (from feature 0, which the inputs hold at 1), wo = I: the
    output of query head h, a weighted average of its kv head's values, is that kv head's number plus one."""
    weights = draw_weights(n_kv_heads, device)
    wv = torch.zeros(n_kv_heads * HEAD_DIM, DIM, device=device)
    wv[:, 0] = torch.arange(1, n_kv_heads + 1, device=device).repeat_interleave(HEAD_DIM)
    weights["wv.weight"], weights["wo.weight"] = wv, torch.eye(DIM, device=device)
    return weights


@pytest.mark.points(2)
@pytest.mark.parametrize("n_kv_heads", [3, 2])
def test_query_head_h_reads_kv_head_h_over_the_group_size(impl, device, seed, n_kv_heads):
    m = gqa(impl, device, n_kv_heads=n_kv_heads)
    load_weights(m, naming_weights(n_kv_heads, device))
    x = torch.randn(2, 5, DIM, device=device)
    x[..., 0] = 1.0
    per_head = attend(m, x).view(2, 5, N_HEADS, HEAD_DIM) - 1.0  # (B, T, nh, hd): the kv head each query head read
    read = per_head.round()
    group = N_HEADS // n_kv_heads
    want = [h // group for h in range(N_HEADS)]
    if not torch.allclose(per_head, read, atol=1e-4) or not bool((read == read[:1, :1, :, :1]).all()):
        raise AssertionError(tr(
            "with every value of kv head j set to j + 1 and wo = I, the features of query head h should all equal the "
            "number of one kv head plus one (weights that sum to 1 average equal values); they do not."))
    got = [int(j) for j in read[0, 0, :, 0].tolist()]
    tiled = [h % n_kv_heads for h in range(N_HEADS)]
    assert got == want, (
        tr("query heads 0..{last} read kv heads {got}; expected {want}: head h reads kv head h // (n_heads // "
           "n_kv_heads).", last=N_HEADS - 1, got=got, want=want)
        + (hint_suffix(tr("kv heads in the order kv0, kv1, ..., kv0, kv1 are tiled, as .repeat(1, n_rep, 1, 1) or "
                          ".repeat(...) does: repeat each one next to itself with .repeat_interleave(n_rep, dim=1), or "
                          "expand and reshape as llama's repeat_kv does.")) if got == tiled else "")
    )


@pytest.mark.points(1)
def test_future_tokens_do_not_leak(impl, device, seed):
    m = gqa(impl, device, n_kv_heads=2)
    x = torch.randn(2, 9, DIM, device=device)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 4, DIM, device=device)
    before, after = attend(m, x), attend(m, changed)
    leak = (after[:, :5] - before[:, :5]).abs().amax(dim=(0, 2)) > 1e-5
    if bool(leak.any()):
        raise AssertionError(
            tr("output at position {t} changed when only positions 5 to 8 changed: the future leaks.",
               t=int(torch.nonzero(leak)[0]))
            + hint_suffix(tr("self-attention here is causal: set the scores of keys j > i to -inf before the softmax "
                             "(torch.ones(T, T, dtype=torch.bool, device=x.device).tril() keeps j <= i)."))
        )


@pytest.mark.hint_after("test_matches_grouped_attention_by_hand")  # the same, with its twist
@pytest.mark.points(1)
def test_the_extra_keep_mask_is_applied_on_top_of_the_causal_one(impl, device, seed):
    m = gqa(impl, device, n_kv_heads=3)
    weights = draw_weights(3, device)
    load_weights(m, weights)
    x = torch.randn(2, 7, DIM, device=device)
    keep = torch.ones(2, 1, 1, 7, dtype=torch.bool, device=device)
    keep[0, ..., 2:4] = False  # batch element 0 may not look at positions 2 and 3
    check_by_hand(m, weights, x, 3, keep, name="output with a keep mask (B, 1, 1, T)",
                  hint="mask is a keep mask: fill the scores where mask == 0 with -inf too, on top of the causal mask.")


@pytest.mark.hint_after("test_matches_grouped_attention_by_hand")  # the same, with its twist
@pytest.mark.points(1)
def test_dropout_acts_in_training_mode_only(impl, device, seed):
    m = gqa(impl, device, n_kv_heads=2, dropout=0.5)
    weights = draw_weights(2, device)
    load_weights(m, weights)
    x = torch.randn(2, 7, DIM, device=device)
    check_by_hand(m, weights, x, 2, name="output in eval mode of a module built with dropout=0.5",
                  hint="in eval mode nothing is dropped: self.attn_dropout and self.resid_dropout = "
                       "nn.Dropout(args.dropout), called as modules.")
    m.train()
    first, second = attend(m, x), attend(m, x)
    assert not torch.equal(first, second), tr(
        "with dropout=0.5 in training mode two calls on the same input gave the same output: apply self.attn_dropout "
        "to the attention weights and self.resid_dropout to the output of wo.")


@pytest.mark.hint_after("test_matches_grouped_attention_by_hand")
@pytest.mark.points(1)
def test_dropout_drops_the_attention_weights_and_the_output_of_wo(impl, device, seed):
    m = gqa(impl, device, n_kv_heads=2, dropout=0.5)
    weights = draw_weights(2, device)
    load_weights(m, weights)
    m.train()
    x = torch.randn(4, 8, DIM, device=device)
    out = attend(m, x)
    expect_weights_and_output_dropped(out, grouped_by_hand(weights, x, N_HEADS, 2),
                                      grouped_by_hand(weights, x, N_HEADS, 2, dtype=torch.float32))


# --- the KV cache's size -------------------------------------------------------------------------


SIZES = {  # n_layers, batch, seq_len, n_kv_heads, head_dim, bytes_per_value (None: the default, 2)
    "every argument given": (3, 5, 11, 7, 13, 4),
    "bytes_per_value left out": (3, 5, 11, 7, 13, None),
    "a 32-layer model, 4096 positions": (32, 1, 4096, 8, 128, 2),
}


@pytest.mark.points(2)
@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
def test_kv_cache_bytes_counts_keys_and_values_in_every_layer(impl, sizes):
    *args, per_value = sizes
    given = args if per_value is None else [*args, per_value]
    got = impl.grouped_query_attention.kv_cache_bytes(*given)
    want = 2 * math.prod(args) * (per_value or 2)
    call = "kv_cache_bytes({args})".format(args=", ".join(map(str, given)))
    assert isinstance(got, int) and not isinstance(got, bool), tr(
        "{call} returned {kind}, expected an int", call=call, kind=type(got).__name__)
    if got != want:
        factors = {**dict(zip(("n_layers", "batch", "seq_len", "n_kv_heads", "head_dim"), args, strict=True)),
                   "bytes_per_value": per_value or 2, "2 (keys and values)": 2}
        short = [name for name, value in factors.items() if value > 1 and got * value == want]
        hint = (tr("the result is short by the factor {name}: count it in.", name=short[0]) if len(short) == 1
                else tr("the cache holds keys and values (2 tensors), each (batch, n_kv_heads, seq_len, head_dim), in "
                        "every layer, each number bytes_per_value bytes (2 by default)."))
        raise AssertionError(tr("{call} = {got}, expected {want}.", call=call, got=got, want=want) + hint_suffix(hint))
