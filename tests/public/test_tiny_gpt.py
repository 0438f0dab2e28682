"""Public tests for exercises/tiny_gpt.py: names and shapes, decoding with the cache, the norms, greedy generation.

Run them with `grader check tiny_gpt`. They need no reference solution: a TinyGPT's inner names are free, so each
test checks a property every correct TinyGPT has, on the model's own weights: decoding token by token with the cache
gives the logits of one call on the whole sequence (in float64, to rounding), the future never reaches the past,
the order of the tokens matters, the logits are the head of the final norm, and generate picks what recomputing the
whole prefix would pick.
"""

import pytest
import torch

from grader.testing import N_, describe, expect_tensor, hint_suffix, load_parameters, tr

VOCAB, DIM, N_HEADS, N_KV_HEADS, N_LAYERS, MAX_SEQ_LEN = 13, 32, 4, 2, 2, 48
HEAD_DIM = DIM // N_HEADS
# float64 rounding is ~1e-15, but correct code may compute in float32 inside (Meta's llama: x.float() in RMSNorm, the
# softmax and RoPE), ~1e-8 here; a cache that is wrong is wrong by far more (1e-3 and up).
F64_ATOL = 1e-5


def build(impl, device, *, dtype=torch.float32, **sizes):
    sizes = {"dim": DIM, "n_heads": N_HEADS, "n_kv_heads": N_KV_HEADS, "n_layers": N_LAYERS,
             "max_seq_len": MAX_SEQ_LEN, **sizes}
    return impl.tiny_gpt.TinyGPT(VOCAB, **sizes).to(device).to(dtype).eval()


def run(m, idx, cache=None):
    """m(idx) or m(idx, cache): the logits (B, T, vocab) and the cache, whatever its layout."""
    out = m(idx) if cache is None else m(idx, cache)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise AssertionError(tr("TinyGPT returned a {type}, expected a pair (logits, cache).",
                                type=type(out).__name__))
    logits = expect_tensor(out[0], name="TinyGPT logits")
    B, T = idx.shape
    assert tuple(logits.shape) == (B, T, VOCAB), (
        tr("for idx of shape {shape} TinyGPT returned logits of shape {got}, expected ({batch}, {length}, {vocab}) = "
           "(B, T, vocab).", shape=tuple(idx.shape), got=tuple(logits.shape), batch=B, length=T, vocab=VOCAB)
    )
    return logits, out[1]


def tokens(batch, length, device):
    return torch.randint(0, VOCAB, (batch, length), device=device)


def decoded(m, idx, schedule):
    """The logits of idx fed in chunks of the sizes in `schedule` (the first without a cache), concatenated."""
    outs, cache, start = [], None, 0
    for size in schedule:
        logits, cache = run(m, idx[:, start:start + size], cache)
        outs.append(logits)
        start += size
    return torch.cat(outs, dim=1), cache


def first_difference(got, want, atol):
    """(position, largest difference) of the first position where got and want (B, T, vocab) differ, else None."""
    gap = (got - want).abs().amax(dim=(0, 2))  # (T,)
    bad = torch.nonzero(gap > atol)
    return None if len(bad) == 0 else (int(bad[0]), float(gap[bad[0]]))


def parameter_names(info):
    return {name for entry, p in info.parameters.items() for name in (entry, *p.get("aliases", []))}


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.points(1)
def test_modules_have_the_contract_names_and_shapes(impl):
    for sizes, dim, n_layers in (({"dim": DIM, "n_layers": 3}, DIM, 3), ({}, 64, 2)):
        info = describe(impl.tiny_gpt.TinyGPT(VOCAB, **sizes))
        shapes = {name: tuple(p["shape"]) for entry, p in info.parameters.items()
                  for name in (entry, *p.get("aliases", []))}
        what = "TinyGPT({args})".format(args=", ".join([str(VOCAB), *(f"{k}={v}" for k, v in sizes.items())]))
        for name in ("tok_embed.weight", "head.weight"):
            assert shapes.get(name) == (VOCAB, dim), (
                tr("{what}: {name} has shape {shape}, expected ({vocab}, {dim}).", what=what, name=name,
                   shape=shapes.get(name), vocab=VOCAB, dim=dim)
                + hint_suffix(tr("tok_embed = nn.Embedding(vocab, dim), head = nn.Linear(dim, vocab, bias=False)."))
            )
        assert "head.bias" not in shapes, tr("{what}: head has a bias: nn.Linear(dim, vocab, bias=False).", what=what)
        assert "norm" in info.modules, tr("{what} has no module named norm, the final norm before the head.",
                                          what=what)
        layers = {int(name.split(".")[1]) for name in shapes if name.startswith("layers.")}
        assert layers == set(range(n_layers)), (
            tr("{what}: the parameters of layers belong to layers {got}, expected {expected}.", what=what,
               got=sorted(layers), expected=list(range(n_layers)))
            + hint_suffix(tr("layers = nn.ModuleList of n_layers blocks."))
        )


@pytest.mark.points(1)
def test_keys_and_values_are_n_kv_heads_wide(impl):
    def count(n_kv_heads):
        info = describe(impl.tiny_gpt.TinyGPT(VOCAB, dim=DIM, n_heads=N_HEADS, n_kv_heads=n_kv_heads,
                                              n_layers=N_LAYERS))
        return sum(int(torch.Size(p["shape"]).numel()) for p in info.parameters.values())

    counts = {n: count(n) for n in (1, 2, 4)}
    per_kv_head = N_LAYERS * 2 * HEAD_DIM * DIM  # wk and wv: head_dim rows each per kv head, in every layer
    for fewer, more in ((1, 2), (2, 4)):
        assert counts[more] - counts[fewer] == (more - fewer) * per_kv_head, (
            tr("TinyGPT with n_kv_heads={more} has {difference} parameters more than with n_kv_heads={fewer}, "
               "expected {expected}: only the key and value projections grow with n_kv_heads, by n_layers * 2 * "
               "head_dim * dim per kv head.", more=more, fewer=fewer, difference=counts[more] - counts[fewer],
               expected=(more - fewer) * per_kv_head)
            + hint_suffix(tr("wk and wv are nn.Linear(dim, n_kv_heads * head_dim, bias=False); wq and wo stay "
                             "nn.Linear(dim, dim, bias=False)."))
        )


@pytest.mark.points(1)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_logits_have_the_shape_and_dtype_of_the_model(impl, device, seed, dtype):
    m = build(impl, device, dtype=dtype)
    logits, _ = run(m, tokens(3, 7, device))
    assert logits.dtype == dtype, tr("a TinyGPT in {dtype} returned logits of dtype {got}.", dtype=dtype,
                                     got=logits.dtype)


# --- the cache ---------------------------------------------------------------------------------

CACHE_HINT = N_("the new tokens sit at positions T_past .. T_past + T - 1: rotate them there, and let new token t see "
                "keys 0 .. T_past + t.")


@pytest.mark.points(1)
def test_future_tokens_do_not_change_earlier_logits(impl, device, seed):
    m = build(impl, device, dtype=torch.float64)
    idx = tokens(2, 12, device)
    before, _ = run(m, idx)
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % VOCAB
    after, _ = run(m, changed)
    found = first_difference(after[:, :6], before[:, :6], F64_ATOL)
    assert found is None, (
        tr("the logits at position {t} changed when only tokens 6 to 11 changed: the future leaks into the past.",
           t=found[0] if found else 0)
        + hint_suffix(tr("mask the scores causally in every call on several tokens: a prompt, or training."))
    )


@pytest.mark.points(3)
def test_decoding_token_by_token_gives_the_logits_of_one_call(impl, device, seed):
    m = build(impl, device, dtype=torch.float64)
    for prompt in torch.randint(1, 9, (3,)).tolist():
        idx = tokens(2, 20, device)
        want, _ = run(m, idx)
        got, _ = decoded(m, idx, (prompt, *[1] * (20 - prompt)))
        found = first_difference(got, want, F64_ATOL)
        assert found is None, (
            tr("after a prompt of {prompt} tokens and one token per call with the cache, the logits at position {t} "
               "differ from one call on all 20 tokens by {gap} (float64).", prompt=prompt, t=found[0],
               gap=format(found[1], ".3g"))
            + hint_suffix(tr(CACHE_HINT))
        )


@pytest.mark.points(1)
def test_decoding_in_chunks_gives_the_logits_of_one_call(impl, device, seed):
    m = build(impl, device, dtype=torch.float64)
    idx = tokens(3, 16, device)
    want, _ = run(m, idx)
    got, _ = decoded(m, idx, (5, 3, 4, 1, 3))
    found = first_difference(got, want, F64_ATOL)
    assert found is None, (
        tr("fed in chunks of 5, 3, 4, 1 and 3 tokens with the cache, the logits at position {t} differ from one call "
           "on all 16 tokens by {gap} (float64).", t=found[0], gap=format(found[1], ".3g"))
        + hint_suffix(tr("with a cache, new token t sits at position T_past + t: it sees keys 0 .. T_past + t, "
                         "tril(diagonal=T_past) on the (T, T_past + T) grid."))
    )


def cache_tensors(cache):
    if isinstance(cache, torch.Tensor):
        return [cache] if cache.is_floating_point() else []
    if isinstance(cache, dict):
        cache = list(cache.values())
    if isinstance(cache, (tuple, list)):
        return [t for part in cache for t in cache_tensors(part)]
    return []


@pytest.mark.points(1)
def test_the_cache_holds_n_kv_heads_per_layer(impl, device, seed):
    m = build(impl, device)
    B, T = 2, 9
    _, cache = run(m, tokens(B, T, device))
    held = sum(t.numel() for t in cache_tensors(cache))
    per_position = 2 * N_LAYERS * B * N_KV_HEADS * HEAD_DIM  # keys and values, every layer
    if held == 0 and not isinstance(cache, (torch.Tensor, tuple, list, dict)):
        return  # a cache object of its own: its layout is free, and its size is not seen from here
    assert held in (per_position * T, per_position * MAX_SEQ_LEN), (
        tr("after {T} tokens in a batch of {B} the cache holds {held} values, expected {expected}: keys and values, "
           "n_kv_heads={n_kv} heads of head_dim={head_dim} per position, in each of {n_layers} layers.", T=T, B=B,
           held=held, expected=per_position * T, n_kv=N_KV_HEADS, head_dim=HEAD_DIM, n_layers=N_LAYERS)
        + hint_suffix(tr("cache k and v as wk and wv make them, n_kv_heads wide; repeat them for the query heads "
                         "after caching."))
    )


# --- positions and norms -------------------------------------------------------------------------


@pytest.mark.points(1)
def test_the_order_of_the_tokens_matters(impl, device, seed):
    m = build(impl, device, dtype=torch.float64, n_layers=1)
    idx = torch.stack([torch.randperm(VOCAB)[:8] for _ in range(2)]).to(device)  # distinct tokens per row
    swapped = idx.clone()
    swapped[:, [1, 4]] = idx[:, [4, 1]]
    before, _ = run(m, idx)
    after, _ = run(m, swapped)
    gap = float((after[:, -1] - before[:, -1]).abs().max())
    assert gap > 1e-6, (
        tr("swapping tokens 1 and 4 of 8 left the last position's logits unchanged (by {gap}): the model cannot tell "
           "where a token is.", gap=format(gap, ".3g"))
        + hint_suffix(tr("rotate the queries and keys with RoPE at their positions before the scores."))
    )


@pytest.mark.points(1)
def test_the_logits_are_the_head_of_the_final_norm(impl, device, seed):
    m = build(impl, device, dtype=torch.float64)
    idx = tokens(2, 7, device)
    before, _ = run(m, idx)
    state = m.state_dict()
    weight = state.get("norm.weight") if isinstance(state, dict) else None
    assert isinstance(weight, torch.Tensor), (
        tr("TinyGPT's norm has no weight, norm.weight.") + hint_suffix(tr("norm = nn.RMSNorm(dim) (or nn.LayerNorm)."))
    )
    load_parameters(m, {"norm.weight": 2 * weight}, name="TinyGPT", names_hint="norm", partial=True)
    after, _ = run(m, idx)
    gap = float((after - 2 * before).abs().max())
    assert gap < 1e-9 * max(1.0, float(before.abs().max())), (
        tr("with norm.weight doubled the logits did not double (off by {gap}): the logits must be head(norm(x)), the "
           "final norm right before the head.", gap=format(gap, ".3g"))
        + hint_suffix(tr("return self.head(self.norm(x)) after the last layer."))
    )


@pytest.mark.points(1)
def test_each_block_norms_its_sublayers_inputs_not_the_stream(impl, device, seed):
    # Pre-norm: x + sublayer(norm(x)). With embeddings a million times larger the sublayers (which see them normed)
    # add next to nothing to the stream, so each position's logits are those of its own token, whatever its context.
    m = build(impl, device, dtype=torch.float64)
    state = m.state_dict()
    load_parameters(m, {"tok_embed.weight": 1e6 * state["tok_embed.weight"]}, name="TinyGPT",
                    names_hint="tok_embed", partial=True)
    idx = tokens(2, 10, device)
    idx[:, 7] = idx[:, 2]  # the same token in two contexts
    logits, _ = run(m, idx)
    a, b = logits[:, 2], logits[:, 7]
    gap = float(((a - b).abs().amax(dim=-1) / a.abs().amax(dim=-1).clamp_min(1e-300)).max())
    assert gap < 1e-3, (
        tr("with the embeddings a million times larger, the same token at positions 2 and 7 still gets logits that "
           "differ by {gap} of their size: the residual stream is normed inside the blocks.", gap=format(gap, ".2%"))
        + hint_suffix(tr("pre-norm: x = x + attention(norm(x)), then x = x + feed_forward(norm(x)); the stream itself "
                         "is normed only by the final norm."))
    )


# --- generate ------------------------------------------------------------------------------------


def generate(impl, m, idx, n):
    out = expect_tensor(impl.tiny_gpt.generate(m, idx, n), name="generate(...)")
    B, T = idx.shape
    assert tuple(out.shape) == (B, T + n), (
        tr("generate(model, idx of shape {shape}, {n}) returned shape {got}, expected ({batch}, {total}) = (B, T + "
           "max_new_tokens).", shape=tuple(idx.shape), n=n, got=tuple(out.shape), batch=B, total=T + n)
        + hint_suffix(tr("the next token is the argmax over the vocabulary, logits[:, -1].argmax(dim=-1, "
                         "keepdim=True), (B, 1)."))
    )
    assert out.dtype == torch.int64, tr("generate returned dtype {dtype}, expected torch.int64.", dtype=out.dtype)
    assert torch.equal(out[:, :T].cpu(), idx.cpu()), tr("generate's output does not start with the prompt.")
    return out


@pytest.mark.points(1)
def test_generate_returns_the_prompt_and_max_new_tokens(impl, device, seed):
    m = build(impl, device)
    generate(impl, m, tokens(3, 5, device), 6)


@pytest.mark.points(2)
def test_generate_picks_what_recomputing_the_prefix_picks(impl, device, seed):
    m = build(impl, device, dtype=torch.float64)
    idx = tokens(2, 5, device)
    out = generate(impl, m, idx, 40)
    for t in range(5, 45):
        logits, _ = run(m, out[:, :t])  # the whole prefix, no cache
        best = logits[:, -1].argmax(dim=-1)
        if not torch.equal(best.cpu(), out[:, t].cpu()):
            b = int(torch.nonzero(best.cpu() != out[:, t].cpu())[0])
            raise AssertionError(
                tr("generate put token {got} at position {t} of row {b}, but the model run on the whole prefix picks "
                   "{best} there.", got=int(out[b, t]), t=t, b=b, best=int(best[b]))
                + hint_suffix(tr("after the prompt give the model only the new token and the cache, model(next_token, "
                                 "cache), and pick the argmax over the vocabulary."))
            )


@pytest.mark.points(1)
def test_generate_runs_the_prompt_once_then_one_token_per_call(impl, device, seed):
    m = build(impl, device)
    log = impl.probes.CallLog(m)
    generate(impl, log, tokens(2, 5, device), 6)
    calls = [(tuple(shape), bool(cached)) for shape, cached in log.calls]
    expected = [((2, 5), False), *[((2, 1), True)] * 6]
    assert calls in (expected, expected[:-1]), (
        tr("generate(model, idx of shape (2, 5), 6) called the model with {calls} (input shape, cache given), "
           "expected the prompt once, then one token (2, 1) with the cache per step.", calls=calls)
        + hint_suffix(tr("logits, cache = model(idx); then each step model(next_token, cache)."))
    )
