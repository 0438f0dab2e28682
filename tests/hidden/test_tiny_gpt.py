"""Hidden tests for exercises/tiny_gpt.py: the cache at random shapes and groupings, long generations, gradients, and
the capstone: trained by the kit on a task that needs an induction head, the model must continue rows it never saw.

A TinyGPT's inner names are free, so nothing here loads the reference's weights: each test checks a property on the
model's own weights. (PYTEST_DONT_REWRITE: the messages below are the whole feedback.)
"""

import math

import pytest
import torch

from grader.testing import (
    N_,
    backward,
    cached_logits,
    describe,
    expect_tensor,
    hint_on_crash,
    hint_suffix,
    induction_batch,
    predictable,
    tr,
)

VOCAB = 13


def run(m, idx, cache=None):
    out = m(idx) if cache is None else m(idx, cache)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise AssertionError(tr("TinyGPT returned a {type}, expected a pair (logits, cache).",
                                type=type(out).__name__))
    return expect_tensor(out[0], name="TinyGPT logits"), out[1]


CACHE_HINT = N_("the new tokens sit at positions T_past .. T_past + T - 1: rotate them there, and let new token t see "
                "keys 0 .. T_past + t.")


@pytest.mark.points(2)
@pytest.mark.parametrize("n_heads, n_kv_heads, n_layers, batch", [(4, 1, 2, 3), (4, 4, 1, 1), (8, 2, 3, 2)],
                         ids=["multi-query", "multi-head", "three layers, 8 heads"])
def test_cached_decoding_equals_one_call_at_random_lengths(impl, device, seed, n_heads, n_kv_heads, n_layers, batch):
    m = impl.tiny_gpt.TinyGPT(VOCAB, dim=32, n_heads=n_heads, n_kv_heads=n_kv_heads, n_layers=n_layers,
                              max_seq_len=40).to(device).double().eval()
    length = int(torch.randint(12, 40, ()))
    idx = torch.randint(0, VOCAB, (batch, length), device=device)
    want, _ = run(m, idx)
    start = int(torch.randint(1, length - 4, ()))
    got, cache = run(m, idx[:, :start])
    steps = [got]
    while start < length:
        size = min(int(torch.randint(1, 4, ())), length - start)
        logits, cache = run(m, idx[:, start:start + size], cache)
        steps.append(logits)
        start += size
    got = torch.cat(steps, dim=1)
    gap = (got - want).abs().amax(dim=(0, 2))
    bad = torch.nonzero(gap > 1e-5)  # float32 rounding inside (llama's x.float()) passes, a wrong cache does not
    assert len(bad) == 0, (
        tr("TinyGPT(n_heads={n_heads}, n_kv_heads={n_kv_heads}, n_layers={n_layers}) fed in random chunks with the "
           "cache: the logits at position {t} of {length} differ from one call on the whole sequence by {gap} "
           "(float64).", n_heads=n_heads, n_kv_heads=n_kv_heads, n_layers=n_layers, t=int(bad[0]) if len(bad) else 0,
           length=length, gap=format(float(gap.max()), ".3g"))
        + hint_suffix(tr(CACHE_HINT))
    )


@pytest.mark.points(1)
@pytest.mark.parametrize("max_seq_len", [12, None], ids=["max_seq_len 12", "the default, 128"])
def test_a_sequence_of_exactly_max_seq_len_is_accepted(impl, device, seed, max_seq_len):
    sizes = {} if max_seq_len is None else {"dim": 32, "max_seq_len": max_seq_len}
    length = max_seq_len or 128
    m = impl.tiny_gpt.TinyGPT(VOCAB, **sizes).to(device).double().eval()
    idx = torch.randint(0, VOCAB, (1 if max_seq_len is None else 2, length), device=device)
    hint = N_("a TinyGPT built with max_seq_len holds max_seq_len positions, 0 .. max_seq_len - 1: refuse only "
              "T_past + T > max_seq_len.")
    with hint_on_crash(hint):
        want, _ = run(m, idx)
        if max_seq_len is None:
            return  # one call on the default's 128 positions is the check; the cache is checked at 12
        got, cache = run(m, idx[:, :5])
        steps = [got]
        for t in range(5, length):
            logits, cache = run(m, idx[:, t:t + 1], cache)
            steps.append(logits)
    gap = (torch.cat(steps, dim=1) - want).abs().amax(dim=(0, 2))
    bad = torch.nonzero(gap > 1e-5)
    assert len(bad) == 0, (
        tr("TinyGPT(max_seq_len={max_seq_len}) fed a prompt of 5 then one token per call up to {length} tokens: the "
           "logits at position {t} differ from one call on the whole sequence by {gap} (float64).",
           max_seq_len=max_seq_len, length=length, t=int(bad[0]) if len(bad) else 0,
           gap=format(float(gap.max()), ".3g"))
        + hint_suffix(tr(CACHE_HINT))
    )


@pytest.mark.points(1)
def test_float64_in_float64_out_and_float32_close_to_it(impl, device, seed):
    m = impl.tiny_gpt.TinyGPT(VOCAB, dim=32, max_seq_len=16).to(device).eval()
    idx = torch.randint(0, VOCAB, (2, 9), device=device)
    logits32, _ = run(m, idx)
    m.double()
    logits64, _ = run(m, idx)
    assert logits64.dtype == torch.float64, tr("a TinyGPT converted with .double() returned logits of dtype {dtype}.",
                                               dtype=logits64.dtype)
    gap = float((logits32.double() - logits64).abs().max())
    assert gap < 1e-3 * max(1.0, float(logits64.abs().max())), (
        tr("the float32 logits differ from the float64 ones of the same model by {gap}.", gap=format(gap, ".3g"))
        + hint_suffix(tr("look for a computation done in a lower precision on the way."))
    )


@pytest.mark.points(1)
def test_generate_zero_new_tokens_returns_the_prompt(impl, device, seed):
    m = impl.tiny_gpt.TinyGPT(VOCAB, dim=32, max_seq_len=16).to(device).eval()
    idx = torch.randint(0, VOCAB, (2, 4), device=device)
    out = expect_tensor(impl.tiny_gpt.generate(m, idx, 0), name="generate(model, idx, 0)")
    assert torch.equal(out.cpu(), idx.cpu()), tr("generate(model, idx, 0) returned shape {shape}, expected the prompt "
                                                 "itself.", shape=tuple(out.shape))


@pytest.mark.points(2)
def test_a_long_generation_with_the_defaults_is_what_recomputing_picks(impl, device, seed):
    m = impl.tiny_gpt.TinyGPT(VOCAB).to(device).double().eval()
    idx = torch.randint(0, VOCAB, (3, 3), device=device)
    out = expect_tensor(impl.tiny_gpt.generate(m, idx, 60), name="generate(model, idx, 60)")
    assert tuple(out.shape) == (3, 63), tr("generate(model, idx of shape (3, 3), 60) returned shape {shape}.",
                                           shape=tuple(out.shape))
    logits, _ = run(m, out[:, :-1])  # one call on the whole sequence: the argmax at each position is the next token
    best = logits[:, 2:].argmax(dim=-1).cpu()
    wrong = torch.nonzero(best != out[:, 3:].cpu())
    assert len(wrong) == 0, (
        tr("after 60 new tokens from a prompt of 3, generate put token {got} at position {t} of row {b}, where the "
           "model run on the whole prefix picks {best}.", got=int(out[wrong[0, 0], wrong[0, 1] + 3]),
           t=int(wrong[0, 1]) + 3, b=int(wrong[0, 0]), best=int(best[wrong[0, 0], wrong[0, 1]]))
        + hint_suffix(tr(CACHE_HINT))
    )


@pytest.mark.points(1)
def test_every_parameter_gets_a_gradient(impl, device, seed):
    m = impl.tiny_gpt.TinyGPT(VOCAB, dim=32, max_seq_len=16).to(device).train()
    idx = torch.randint(0, VOCAB, (2, 8), device=device)
    grads = backward(m, idx, grad_output=torch.randn(2, 8, VOCAB, device=device), output_index=0).parameters
    names = set(describe(m).parameters)
    missing = sorted(name for name in names if grads.get(name) is None or not bool(grads[name].abs().sum() > 0))
    assert not missing, (
        tr("no gradient reached {names}: use every parameter in forward, without .detach() or torch.no_grad().",
           names=missing[:4])
    )


# --- the capstone: it must learn -----------------------------------------------------------------

# The kit's task (grader/inside/shared/induction.py): rows of `period` distinct random tokens of 8 repeated, the period
# drawn per row from 3..6, so no fixed offset predicts every row: only an induction head does. The worker trains on
# rows it draws from a seed drawn here per grading; the held-out rows, drawn here too, reach the worker one token per
# call once training is over. Initialisation is not part of the contract, and the budget is the slowest correct
# style's: the head tied to tok_embed with N(0, 0.02) weights stops at 423-1058 steps on 9 of 10 draws (nanoGPT's
# initialisation, 5 draws: 98.3-98.8% of the held-out predictions, 6-15 s of one core), and on one draw of the
# version without nanoGPT's smaller residual projections never reaches the stop: 95.8% after 1500 steps, 98.0% after
# 2000, 98.5% after 3000. Untied N(0, 0.02) stops at 148-199 steps (99.3-99.7%), Hugging Face's llama at 139-192
# (98.5-99.5%), torchtitan's llama at 131-328 (98.5-100%), the reference at 85-97 (99.6-100%, 1.5 s). On 16 tokens
# with periods 3..8 the tied head predicted 73-79% after 1000 steps (3 draws). A TinyGPT without a causal mask reads
# the token it predicts in training and cannot one token at a time: 49-63% on 4 draws. Without RoPE a TinyGPT learns
# this task too, through what the causal mask tells of positions (99% at its stop, 329-339 steps; 97% after 1000
# steps on 16 tokens, where the tied head had 73-79%): no budget passes the tied head and fails it, and the public
# suite's token order test is what catches it.
TASK = {"vocab": 8, "length": 24, "periods": (3, 6)}
TRAINING = {"steps": 2000, "batch": 32, "lr": 3e-3, "stop_below": 0.05}
N_TEST, THRESHOLD = 128, 0.95


def draw_task(seed):
    """The training seed and the held-out rows, drawn here from the test's seed (derived from the grading's)."""
    generator = torch.Generator().manual_seed(seed)
    train_seed = int(torch.randint(0, 2**31 - 1, (), generator=generator))
    rows, period = induction_batch(generator, batch=N_TEST, **TASK)
    prompt = int(torch.randint(1, TASK["periods"][0] + 1, (), generator=generator))
    return train_seed, rows, period, prompt


def accuracy(logits, rows, period):
    keep = predictable(period, rows.size(1))
    return float((logits.argmax(dim=-1).cpu() == rows[:, 1:])[keep].double().mean())


@pytest.mark.points(12)
@pytest.mark.slow
@pytest.mark.warm_worker  # torch.optim's first step imports torch._dynamo
@pytest.mark.call_timeout(240)  # the slowest correct draw: 30 s of one core for 2000 steps, more when loaded
def test_capstone_trained_model_continues_fresh_rows_by_induction(impl, device, seed):
    train_seed, rows, period, prompt = draw_task(seed)
    impl.torch.manual_seed(train_seed)
    m = impl.tiny_gpt.TinyGPT(TASK["vocab"], max_seq_len=TASK["length"]).to(device)
    rows_on = rows.to(device)
    m.eval()
    untrained = accuracy(cached_logits(m, rows_on, prompt), rows, period)
    result = impl.induction.train_induction(m, rows=TASK, **TRAINING, seed=train_seed)
    losses = [float(loss) for loss in result["losses"]]  # the worker's account: used in messages, never for points
    m.eval()
    logits = cached_logits(m, rows_on, prompt)  # the loop runs here: the prompt, then one token per call
    learned = accuracy(logits, rows, period)
    task = tr("(task {seed})", seed=seed)
    if learned < THRESHOLD:
        first, last = (sum(losses[:20]) / 20, sum(losses[-20:]) / 20) if losses else (math.nan, math.nan)
        raise AssertionError(
            tr("after {steps} training steps your TinyGPT predicts {accuracy} of the tokens after the repeat in "
               "{count} fresh rows {task}; it needs {threshold}, the reference 99%. Training loss went from {first} "
               "to {last}.", steps=len(losses), accuracy=format(learned, ".0%"), count=N_TEST, task=task,
               threshold=format(THRESHOLD, ".0%"), first=format(first, ".3f"), last=format(last, ".3f"))
            + hint_suffix(tr("an induction head needs to know where each token is (RoPE on queries and keys at their "
                             "positions) and a causal mask in training; with a wrong cache, the predictions made one "
                             "token at a time are not those training taught."))
        )
    assert untrained < 0.5, (
        tr("before any training your TinyGPT already predicted {accuracy} of the fresh rows {task}: what is judged is "
           "what it learns.", accuracy=format(untrained, ".0%"), task=task)
    )
    # The model that answered one token at a time is the one a single call runs, and lives in its parameters: a
    # fresh TinyGPT that loads them computes the same logits.
    whole, _ = run(m, rows_on[:, :-1])
    gap = float((whole - logits).abs().max())
    assert gap < 1e-3 * max(1.0, float(logits.abs().max())), (
        tr("your trained TinyGPT predicts {accuracy} of the fresh rows one token at a time, but one call on the whole "
           "rows gives other logits (by {gap}): training saw the model that call runs.",
           accuracy=format(learned, ".0%"), gap=format(gap, ".3g"))
        + hint_suffix(tr("mask the scores causally in every call on several tokens: a prompt, or training."))
    )
    fresh = impl.tiny_gpt.TinyGPT(TASK["vocab"], max_seq_len=TASK["length"]).to(device).eval()
    fresh.load_state_dict(m.state_dict())
    again = cached_logits(fresh, rows_on, prompt)
    gap = float((again - logits).abs().max())
    assert gap < 1e-4 * max(1.0, float(logits.abs().max())), (
        tr("a new TinyGPT holding the trained model's state_dict() predicts differently (by {gap}): what the model "
           "learned must be in its parameters.", gap=format(gap, ".3g"))
    )
