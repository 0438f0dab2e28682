"""Hidden tests for exercises/transformer.py: structure, the golden encode/decode/forward, greedy decoding,
and the capstone: the student's model, trained by the kit on a copy task, must copy sequences it never saw.

The submission gets the reference's weights (by name), so any difference is in the computation. Expected
values are float64 (the reference's golden copy); each tolerance comes from how far the float32 reference
lands from them on the same inputs. (PYTEST_DONT_REWRITE: the messages below are the whole feedback.)
"""

import math

import pytest
import torch

from grader.testing import (
    FIRST_DATA_TOKEN,
    N_,
    SubmissionFailure,
    assert_close,
    backward,
    copy_batch,
    derangement,
    describe,
    expect_dropout,
    expect_tensor,
    float64,
    golden,
    gradient_hint,
    greedy_copy,
    hint_suffix,
    load_parameters,
    only_match,
    shifted,
    tolerance,
    tr,
)

SRC_VOCAB, TGT_VOCAB, D_MODEL, N_HEADS, N_LAYERS, D_FF, MAX_SEQ_LEN = 11, 13, 32, 4, 2, 64, 24


def build(lib, *, dropout=0.0):
    return lib.transformer.Transformer(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                                       d_ff=D_FF, dropout=dropout, max_seq_len=MAX_SEQ_LEN)


def load(m, r):
    """r's parameters into m by name, and r's buffers where m has them (pos.pe, the causal masks)."""
    info = describe(m)
    state = r.state_dict()
    # A buffer of another size (pos.pe for max_len=5000 rather than max_seq_len) stays the submission's own.
    buffers = {name for name, b in info.buffers.items()
               if b["persistent"] and name in state and list(b["shape"]) == list(state[name].shape)}
    parameters = dict(r.named_parameters())
    weights = {name: value.detach() for name, value in state.items() if name in parameters or name in buffers}
    load_parameters(m, weights, name="Transformer",
                    names_hint=tr("src_embed, tgt_embed, pos, encoder, decoder, generator, and inside them the "
                                  "earlier exercises' names"))


def pair(impl, ref, device, *, dropout=0.0):
    """The reference (trusted) and the submission's Transformer, holding the same weights, both in eval mode."""
    r = build(ref, dropout=dropout)
    m = build(impl, dropout=dropout)
    load(m, r)
    return m.to(device).eval(), r.to(device).eval()


def tokens(vocab, batch, length, device):
    return torch.randint(0, vocab, (batch, length), device=device)


def padding(batch, length, device):
    """A padding keep mask (B, 1, 1, T): each batch element keeps its first 3..T-1 positions, so that every draw pads
    (a mask that keeps every position would pass code that ignores it)."""
    lengths = torch.randint(3, length, (batch, 1))
    return (torch.arange(length) < lengths).view(batch, 1, 1, length).to(device)


def call(m, method, *args, hint="", **kwargs):
    """m.method(*args, **kwargs), a tensor; `hint` (English, or already translated) closes the message of a failure."""
    name = N_("Transformer output") if method == "forward" else f"{method}(...)"
    try:
        fn = m if method == "forward" else getattr(m, method)
        return expect_tensor(fn(*args, **kwargs), name=name)
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(hint))) from None


def check_golden(m, r, method, *args, name, hint, **kwargs):
    """m.method(*args) against the float64 golden of r, with a tolerance derived from r in float32."""
    fn = r if method == "forward" else getattr(r, method)
    want = golden(fn, *args, **kwargs)
    atol = tolerance(fn(*args, **kwargs), want)
    dtype = next((a.dtype for a in args if a.is_floating_point()), torch.float32)
    assert_close(call(m, method, *args, hint=hint, **kwargs), want.to(dtype), atol=atol, name=name, hint=hint)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.confirmed_by("test_matches_golden")
@pytest.mark.points(1)
def test_parameters_and_buffers_have_the_contract_names_and_shapes(impl, ref):
    got, want = describe(build(impl, dropout=0.1)), describe(build(ref, dropout=0.1))
    shapes = {name: p["shape"] for name, p in got.parameters.items()}
    expected = {name: p["shape"] for name, p in want.parameters.items()}
    missing = sorted(set(expected) - set(shapes))
    extra = sorted(set(shapes) - set(expected))
    assert not missing and not extra, (
        tr("Transformer's parameters differ from the contract's: missing {missing}, unexpected {extra}.",
           missing=missing[:4], extra=extra[:4])
        + hint_suffix(tr("src_embed, tgt_embed (nn.Embedding), pos, encoder, decoder, generator (nn.Linear(d_model, "
                         "tgt_vocab))."))
    )
    wrong = sorted(name for name, shape in shapes.items() if shape != expected[name])
    assert not wrong, (
        tr("{name} has shape {shape}, expected {expected}.", name=wrong[0], shape=shapes[wrong[0]],
           expected=expected[wrong[0]])
        + hint_suffix(tr("src_embed has src_vocab rows, tgt_embed and generator have tgt_vocab."))
    )
    assert "pos.pe" in got.buffers, (
        tr("Transformer has no buffer pos.pe (buffers: {names}).", names=sorted(got.buffers)[:4])
        + hint_suffix(tr("one PositionalEncoding named pos, shared by both sides."))
    )
    # pos must apply the model's dropout (as a module or as F.dropout): a new model is in training mode,
    # so pos(zeros) = dropout(pe) zeroes about half the values at p=0.5 (pe itself has few exact zeros).
    x = torch.zeros(4, 16, D_MODEL)
    dropped = (expect_tensor(build(impl, dropout=0.5).pos(x), name="pos(x)") == 0).float().mean().item()
    assert 0.3 < dropped < 0.7, (
        tr("in training mode, a Transformer built with dropout=0.5 zeroed {share} of pos(zeros): "
           "give PositionalEncoding the model's dropout, PositionalEncoding(d_model, max_seq_len, dropout)",
           share=format(dropped, ".0%"))
    )


# --- agreement with the golden -----------------------------------------------------------------

SCALE = N_("the embeddings times sqrt(d_model), then self.pos")
FORWARD_RECIPE = N_("forward = generator(decode(encode(src, src_mask), tgt, src_mask, tgt_mask)): raw logits, no "
                    "softmax.")
ENCODE, DECODE, FORWARD = "test_matches_golden[encode]", "test_matches_golden[decode]", "test_matches_golden[forward]"
CASES = {  # method, batch, source and target lengths, masks, hint ({scale}: SCALE), the cases the hint assumes right
    "encode": ("encode", 2, 7, 5, "", N_("encode(src) = encoder(pos(src_embed(src) * sqrt(d_model)), src_mask): "
                                         "{scale}."), ()),
    "encode with a source padding mask": (
        "encode", 2, 7, 5, "src", N_("pass src_mask on to the encoder: encoder(x, src_mask)."), (ENCODE,)),
    "decode": ("decode", 2, 7, 5, "", N_("decode(memory, tgt) = decoder(pos(tgt_embed(tgt) * sqrt(d_model)), memory, "
                                         "src_mask, tgt_mask): {scale}, the same pos as the source."), ()),
    "decode with a source padding mask": (
        "decode", 2, 7, 5, "src", N_("pass src_mask on to the decoder: its cross-attention must not read padding."),
        (DECODE,)),
    "decode with a target padding mask": (
        "decode", 2, 7, 5, "tgt", N_("pass tgt_mask on to the decoder, for its self-attention."), (DECODE,)),
    "forward": ("forward", 2, 7, 5, "", FORWARD_RECIPE, (ENCODE, DECODE)),
    "forward with both masks": (
        "forward", 2, 7, 5, "both", N_("pass src_mask to encode and decode, tgt_mask to decode."), (FORWARD,)),
    "forward, target longer than source": (
        "forward", 2, 4, 9, "", N_("T_tgt may differ from T_src: the logits follow tgt."), (FORWARD,)),
    "forward, batch of one": (
        "forward", 1, 6, 6, "", N_("take B from the inputs; do not assume a batch of 2 or more."), (FORWARD,)),
}


@pytest.mark.points(1)
@pytest.mark.parametrize("method, batch, T_src, T_tgt, masks, hint", [
    # A case's hint is about its twist (a mask, the lengths, forward's composition): it assumes the plainer cases.
    pytest.param(*case, id=name, marks=pytest.mark.hint_after(*after) if after else ())
    for name, (*case, after) in CASES.items()])
def test_matches_golden(impl, ref, device, seed, method, batch, T_src, T_tgt, masks, hint):
    m, r = pair(impl, ref, device)
    src, tgt = tokens(SRC_VOCAB, batch, T_src, device), tokens(TGT_VOCAB, batch, T_tgt, device)
    kwargs = {}
    if masks in ("src", "both"):
        kwargs["src_mask"] = padding(batch, T_src, device)
    if masks in ("tgt", "both"):
        kwargs["tgt_mask"] = padding(batch, T_tgt, device)
    if method == "encode":
        args = (src,)
    elif method == "decode":
        args = (torch.randn(batch, T_src, D_MODEL, device=device), tgt)
    else:
        args = (src, tgt)
    check_golden(m, r, method, *args, name=tr("{what} output", what=method), hint=tr(hint, scale=tr(SCALE)),
                 **kwargs)


@pytest.mark.hint_after(FORWARD)  # the same, in float64
@pytest.mark.points(1)
def test_float64_in_float64_out(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    m.to(torch.float64)
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 5, device)
    logits = call(m, "forward", src, tgt)
    assert logits.dtype == torch.float64, (
        tr("a Transformer converted with .double() returned logits of dtype {dtype}, expected torch.float64.",
           dtype=logits.dtype)
        + hint_suffix(tr("look for a hard-coded float32 (.float(), torch.tensor(math.sqrt(d))) in encode or decode."))
    )
    # Float32 steps inside a float64 model are allowed (the course notes take the softmax in float32):
    # the logits must be as close as the float32 reference gets, and of dtype float64.
    want = golden(r, src, tgt)
    assert_close(logits, want, atol=tolerance(r(src, tgt), want), name="float64 logits",
                 hint="in float64: look for a computation done in float32 on the way.")


@pytest.mark.hint_after(FORWARD)  # the same, with dropout=0.5
@pytest.mark.points(1)
def test_eval_mode_switches_dropout_off(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dropout=0.5)
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 5, device)
    first, second = call(m, "forward", src, tgt), call(m, "forward", src, tgt)
    assert torch.equal(first, second), tr("in eval mode two calls on the same input differ: dropout must be off")
    check_golden(m, r, "forward", src, tgt, name="logits in eval mode, built with dropout=0.5",
                 hint="use modules (self.pos, the encoder's and decoder's dropouts) that switch off in eval mode, "
                      "not F.dropout(..., training=True).")


@pytest.mark.points(1)
def test_embeddings_are_scaled_by_sqrt_d_model(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    src = tokens(SRC_VOCAB, 2, 7, device)
    want = golden(r.encode, src)
    got = call(m, "encode", src)
    hint = tr("encode and decode multiply the embeddings by math.sqrt(d_model) BEFORE adding the positions: with "
              "embeddings of std 1/sqrt(d_model) both then have size about 1 and neither drowns the other.")
    causes = {(1.0, 1.0): N_("your embeddings are not scaled at all. {hint}"),
              (float(D_MODEL), 1.0): N_("your embeddings are scaled by d_model, not sqrt(d_model). {hint}"),
              (1.0, math.sqrt(D_MODEL)): N_("your embeddings are scaled by sqrt(d_model) after the positions are "
                                            "added, not before. {hint}"),
              (math.sqrt(D_MODEL), 1.0): ""}
    with torch.no_grad(), float64(r):  # a cause is named where the output matches it alone (claims.only_match)
        outputs = {(scale, after): r.encoder(r.pos(r.src_embed(src) * scale) * after) for scale, after in causes}
    cause = only_match(got, outputs, atol=1e-4)
    if cause is not None and causes[cause]:
        hint = tr(causes[cause], hint=hint)
    assert_close(got, want.float(), atol=tolerance(r.encode(src), want), name="encode(src)", hint=hint)


@pytest.mark.points(1)
def test_future_target_tokens_do_not_change_earlier_logits(impl, ref, device, seed):
    m, _ = pair(impl, ref, device)
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 8, device)
    before = call(m, "forward", src, tgt)
    changed = tgt.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % TGT_VOCAB
    after = call(m, "forward", src, changed)
    leak = (after[:, :5] - before[:, :5]).abs().amax(dim=(0, 2)) > 1e-5
    if bool(leak.any()):
        t = int(torch.nonzero(leak)[0])
        raise AssertionError(
            tr("the logits at target position {t} changed when only target tokens 5 to 7 changed: the future leaks, "
               "so a model trained with teacher forcing would copy the answer instead of predicting it.", t=t)
            + hint_suffix(tr("the decoder's self-attention must be causal; do not hand it the source or a mask that "
                             "undoes it."))
        )


@pytest.mark.hint_after(FORWARD)  # its hint assumes forward is right
@pytest.mark.points(1)
def test_every_parameter_gets_the_golden_gradient(impl, ref, device, seed):
    m, r = pair(impl, ref, device)
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 5, device)
    grad_output = torch.randn(2, 5, TGT_VOCAB, device=device)
    with float64(r):
        golden_grads = backward(r, src, tgt, grad_output=grad_output.double())
    ref32 = backward(r, src, tgt, grad_output=grad_output)
    got = backward(m, src, tgt, grad_output=grad_output)
    for name, want in golden_grads.parameters.items():
        grad = got.parameters.get(name)
        assert grad is not None, tr("no gradient reached {name}: use it in forward, without .detach() or "
                                    "torch.no_grad()", name=name)
        atol = tolerance(ref32.parameters[name], want)
        assert_close(grad, want.float(), atol=atol, name=tr("gradient of {name}", name=name),
                     hint=gradient_hint(grad, want, atol=atol, name=name, scattered=N_(
                         "the logits are right, so look for a .detach(), torch.no_grad() or an in-place edit of a "
                         "parameter in forward.")))


# --- greedy decoding ---------------------------------------------------------------------------


def greedy(impl, m, src, max_len, start):
    ys = expect_tensor(impl.transformer.greedy_decode(m, src, max_len, start), name="greedy_decode(...)")
    B = src.size(0)
    assert tuple(ys.shape) == (B, max_len), (
        tr("greedy_decode(model, src of shape {shape}, max_len={max_len}, start_symbol={start}) returned shape {got}, "
           "expected ({batch}, {max_len}): max_len tokens, the start symbol included.", shape=tuple(src.shape),
           max_len=max_len, start=start, got=tuple(ys.shape), batch=B)
    )
    assert ys.dtype == torch.int64, tr("greedy_decode returned dtype {dtype}, expected torch.int64", dtype=ys.dtype)
    assert bool((ys[:, 0] == start).all()), (
        tr("greedy_decode's first column is {column}, expected start_symbol = {start} in every row",
           column=ys[:, 0].tolist(), start=start)
    )
    return ys


@pytest.mark.points(1)
@pytest.mark.parametrize("batch, T_src, max_len, start", [(3, 5, 9, 3), (1, 8, 4, 0)],
                         ids=["max_len longer than the source", "batch of one"])
def test_greedy_decode_shape_dtype_and_start(impl, ref, device, seed, batch, T_src, max_len, start):
    # A model whose first decoded token is not the start symbol, in any row: else a decoding that leaves the start
    # symbol out would begin with it all the same.
    for _ in range(20):
        r = build(ref).to(device).eval()
        src = tokens(SRC_VOCAB, batch, T_src, device)
        if bool((ref.transformer.greedy_decode(r, src, 2, start)[:, 1] != start).all()):
            break
    m = build(impl)
    load(m, r)
    greedy(impl, m.to(device).eval(), src, max_len, start)


@pytest.mark.hint_after(FORWARD)  # its hint assumes the model is right
@pytest.mark.points(2)
def test_greedy_decode_agrees_with_the_reference(impl, ref, device, seed):
    # A random model often decodes one sequence whatever its source (the same tokens in every row), which a decode
    # that ignores the source, the positions or the embeddings' scale would decode too: the reference is drawn again
    # until its decodings differ between rows and one of them holds three tokens or more (about 4 draws in 5 do).
    for _ in range(20):
        r = build(ref).to(device).eval()
        src = tokens(SRC_VOCAB, 8, 7, device)
        want = ref.transformer.greedy_decode(r, src, 8, 2)
        rows = want[:, 1:].tolist()
        if len({tuple(row) for row in rows}) > 1 and max(len(set(row)) for row in rows) >= 3:
            break
    m = build(impl)
    load(m, r)
    m = m.to(device).eval()
    ys = greedy(impl, m, src, 8, 2)
    if torch.equal(ys.cpu(), want.cpu()):
        return
    # Where the two differ, accept only a near-tie of the golden model's logits.
    with torch.no_grad(), float64(r):
        for t in range(1, ys.size(1)):
            logits = r(src, ys[:, :t].to(device))[:, -1]  # (B, tgt_vocab), in float64
            chosen = logits.gather(-1, ys[:, t : t + 1].to(device)).squeeze(-1)
            gap = logits.max(dim=-1).values - chosen
            if bool((gap > 1e-4).any()):
                b = int(torch.nonzero(gap > 1e-4)[0])
                raise AssertionError(
                    tr("greedy_decode returned row {b} = {row}, the reference decodes {expected}: after {prefix} the "
                       "most likely token is {best}, not {chosen}.", b=b, row=ys[b].tolist(),
                       expected=want[b].tolist(), prefix=ys[b, :t].tolist(), best=int(logits[b].argmax()),
                       chosen=int(ys[b, t]))
                    + hint_suffix(tr("encode once, then each step decode all of ys and append "
                                     "generator(out[:, -1]).argmax(dim=-1)."))
                )


# --- the capstone: it must learn ---------------------------------------------------------------

# The kit's task (grader/inside/shared/capstone.py): copy a sequence through a code table drawn for each grading (a
# derangement of the data tokens, so echoing the source scores 0). Training stops once the mean loss of 20 steps is
# under `stop_below`: a correct model is graded as soon as it has learned, however slowly it starts, and only a model
# that never learns pays for the whole budget (4000 steps, about 10 s on one core). Initialisation is not part of the
# contract, so the settings are calibrated to the slowest correct styles: tests/kit/test_capstone_styles.py trains each
# correct transformer.py of tests/kit on 20 task draws (`benchmarks/grading_time.py --capstone-only` prints the steps
# and accuracy per draw). Measured on draws 0-19, steps to the stop and the worst share of fresh sequences decoded: the
# reference 180-280 steps (0.6 s), 93%; nanoGPT's and Hugging Face's N(0, 0.02) weights, whose embeddings are small
# beside the positions, 120-190, 92%; Xavier everywhere 350-480, 91%; nn.Embedding's own N(0, 1), which drowns the
# positions, 1480-1830, 93%. What the settings were chosen against: with d_model 16 the N(0, 0.02) styles stall on some
# draws (a loss near 1.7 after 3000 steps, at learning rates from 1e-3 to 1e-2); a stop at 0.02 leaves some styles
# decoding 87%, at 0.05 80%; a larger learning rate helps the N(0, 1) style little (1100 steps at 8e-3). One layer per
# stack learns the task as surely as two, in half the time; the golden tests check the stacking with two.
COPY = {"vocab": 10, "length": 6, "steps": 4000, "batch": 32, "lr": 5e-3, "stop_below": 0.01, "warmup": 10}
SIZES = {"d_model": 32, "n_heads": 2, "n_layers": 1, "d_ff": 128, "dropout": 0.0, "max_seq_len": 16}
TRAIN_SEED, N_TEST = 0, 200
THRESHOLD = 0.8


def draw_task(seed):
    """The code table and the fresh test sequences, drawn here from `seed`: the test's, derived from the grading's
    (grader.host.seeds), so a regrade of the same files draws the same task, and a new file another."""
    generator = torch.Generator().manual_seed(seed)
    table = derangement(generator, COPY["vocab"])
    src = copy_batch(generator, batch=N_TEST, length=COPY["length"], vocab=COPY["vocab"])
    return seed, table, src


def trained_reference(ref, m, device):
    """The kit's reference Transformer holding the weights the submission's model reports it learned (by name)."""
    r = ref.transformer.Transformer(COPY["vocab"], COPY["vocab"], **SIZES)
    own = r.state_dict()
    state = m.state_dict()
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AssertionError(tr("state_dict() of your trained Transformer did not return a dict of tensors"))
    for name in dict(r.named_parameters()):
        if name not in state:
            raise AssertionError(tr("your trained Transformer has no parameter {name}: the grader runs the weights "
                                    "your model learned through the kit's own Transformer, by the contract's names",
                                    name=repr(name)))
        if state[name].shape != own[name].shape:
            raise AssertionError(tr("your trained Transformer's {name} has shape {shape}, the contract's {expected}",
                                    name=name, shape=tuple(state[name].shape), expected=tuple(own[name].shape)))
    r.load_state_dict({k: v for k, v in state.items() if k in own and own[k].shape == v.shape}, strict=False)
    return r.to(device).eval()


@pytest.mark.hint_after(FORWARD)  # its hints assume the model is right
@pytest.mark.points(20)
@pytest.mark.slow
@pytest.mark.warm_worker  # torch.optim's first step imports torch._dynamo
@pytest.mark.call_timeout(60)
def test_capstone_trained_model_copies_fresh_sequences(impl, ref, device, seed):
    seed, table, src = draw_task(seed)
    want = table[src]
    impl.torch.manual_seed(TRAIN_SEED)
    src_on = src.to(device)
    m = impl.transformer.Transformer(COPY["vocab"], COPY["vocab"], **SIZES).to(device)
    result = impl.capstone.train_copy(m, table=table, **COPY, seed=TRAIN_SEED)
    losses = [float(loss) for loss in result["losses"]]  # the worker's account: used in messages, never for points
    m.eval()
    decoded = greedy_copy(m, src_on).cpu()  # the loop runs here; each step asks the worker for logits
    exact = (decoded == want).all(dim=1)
    accuracy = exact.float().mean().item()
    task = tr("(task {seed})", seed=seed)
    broke = next((step for step, loss in enumerate(losses, 1) if not math.isfinite(loss)), None)
    if broke is not None and accuracy < THRESHOLD:
        raise AssertionError(
            tr("the training loss was {loss} at step {step}, so training stopped: your Transformer decodes {accuracy} "
               "of {count} fresh sequences right (it needs {threshold}).", loss=losses[broke - 1], step=broke,
               accuracy=format(accuracy, ".0%"), count=N_TEST, threshold=format(THRESHOLD, ".0%"))
            + hint_suffix(tr("a NaN usually comes from a row of scores masked entirely (softmax of all -inf; can a "
                             "position see itself?) or a division by zero."))
        )
    if accuracy < THRESHOLD:
        row = int(torch.nonzero(~exact)[0])
        first, last = (sum(losses[:20]) / 20, sum(losses[-20:]) / 20) if losses else (math.nan, math.nan)
        plain = math.log(COPY["vocab"] - FIRST_DATA_TOKEN)
        # "Hints:" is part of the message, not a closing hint (hint_suffix): the Chinese keeps it so.
        raise AssertionError(
            tr("after {steps} training steps your Transformer decodes {accuracy} of {count} fresh sequences exactly "
               "(token accuracy {tokens}); it needs {threshold}, the reference 100%. E.g. {src} should give {want}, "
               "got {got} {task}. Training loss went from {first} to {last} (guessing: {plain}). Hints: if the loss "
               "fell near 0 but the outputs are wrong, the decoder saw the answer in training (is its self-attention "
               "causal? does forward give the decoder tgt, not src?); "
               "if it stayed high, check that self.pos adds the positions on both sides, that forward returns raw "
               "logits from generator(decode(encode(src), tgt)), and that the embeddings are multiplied by "
               "sqrt(d_model).", steps=len(losses),
               accuracy=format(accuracy, ".0%"), count=N_TEST,
               tokens=format((decoded == want).float().mean().item(), ".0%"), threshold=format(THRESHOLD, ".0%"),
               src=src[row].tolist(), want=want[row].tolist(), got=decoded[row].tolist(), task=task,
               first=format(first, ".3f"), last=format(last, ".3f"), plain=format(plain, ".3f"))
        )
    # The model that answered must be the Transformer its weights make: its teacher-forced logits are those of the
    # kit's reference holding the weights it reports, and those weights decode as well there.
    r = trained_reference(ref, m, device)
    tgt_in = shifted(want).to(device)  # what train_copy feeds the decoder
    expected = golden(r, src_on, tgt_in)
    atol = tolerance(r(src_on, tgt_in), expected)
    before = call(m, "forward", src_on, tgt_in)
    assert_close(before, expected.float(), atol=atol, name="your trained Transformer's logits on the fresh sequences",
                 hint="they must be what the kit's reference Transformer computes with the weights your model's "
                      "state_dict() returns: encode, decode, generator and forward must use the module's own "
                      "parameters, and forward must be generator(decode(encode(src), tgt)).")
    by_reference = greedy_copy(r, src_on).cpu()
    agree = (by_reference == want).all(dim=1).float().mean().item()
    assert agree >= THRESHOLD, (
        tr("your Transformer decodes {accuracy} of fresh sequences right, but the weights it reports it learned, run "
           "through the kit's reference Transformer by the contract's names, decode only {agree} {task}: the model "
           "that answered is not a Transformer with those weights.", accuracy=format(accuracy, ".0%"),
           agree=format(agree, ".0%"), task=task)
        + hint_suffix(tr("encode, decode and generator must use the module's own parameters, the ones state_dict() "
                         "returns."))
    )
    # Judge how it learned too: teacher-forced predictions must not read the answer from later target tokens.
    peek = tgt_in.clone()
    data = COPY["vocab"] - FIRST_DATA_TOKEN
    peek[:, 3:] = (peek[:, 3:] - FIRST_DATA_TOKEN + 1) % data + FIRST_DATA_TOKEN  # other tokens after position 2
    after = call(m, "forward", src_on, peek).cpu()
    assert torch.allclose(before.cpu()[:, :3], after[:, :3], atol=1e-4), (
        tr("your trained Transformer decodes {accuracy} of fresh sequences right, but its predictions at positions "
           "0-2 change when only the target tokens after position 2 change: in training it could read the answer "
           "from the future.", accuracy=format(accuracy, ".0%"))
        + hint_suffix(tr("the decoder's self-attention must be causal."))
    )


# --- defaults, and dropout's probability in every part ---------------------------------------------

DEFAULTS = ("Transformer(src_vocab, tgt_vocab, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1, "
            "max_seq_len=512)")  # code: the same in every language
PASS_DROPOUT = N_("pass dropout on to every part: PositionalEncoding(d_model, max_seq_len, dropout), "
                  "Encoder(n_layers, d_model, n_heads, d_ff, dropout), Decoder(n_layers, d_model, n_heads, d_ff, "
                  "dropout, max_seq_len).")


@pytest.mark.hint_after(FORWARD)  # the same, with the defaults
@pytest.mark.points(1)
def test_default_sizes_match_golden(impl, ref, device, seed):
    r = ref.transformer.Transformer(SRC_VOCAB, TGT_VOCAB)
    m = impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB)
    load(m, r)
    m, r = m.to(device).eval(), r.to(device).eval()
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 6, device)
    check_golden(m, r, "forward", src, tgt,
                 name=tr("Transformer({src_vocab}, {tgt_vocab}) logits in eval mode", src_vocab=SRC_VOCAB,
                         tgt_vocab=TGT_VOCAB),
                 hint=tr("built with the defaults, {defaults}: n_heads splits d_model into heads, so a wrong default "
                         "changes the output even where the weights are the same.", defaults=DEFAULTS))


@pytest.mark.hint_after(FORWARD)  # the same, in training mode
@pytest.mark.points(1)
def test_dropout_zero_in_training_mode_matches_golden(impl, ref, device, seed):
    m, r = pair(impl, ref, device, dropout=0.0)
    m, r = m.train(), r.train()
    src, tgt = tokens(SRC_VOCAB, 2, 7, device), tokens(TGT_VOCAB, 2, 6, device)
    check_golden(m, r, "forward", src, tgt, name="logits in training mode of a Transformer built with dropout=0.0",
                 hint=tr("with dropout=0.0 nothing is dropped, even in training mode: {recipe}",
                         recipe=tr(PASS_DROPOUT)))


@pytest.mark.points(1)
def test_every_dropout_drops_with_the_probability_it_was_given(impl, seed):
    # The default, 0.1, is the public suite's test_every_dropout_drops_with_the_default_probability.
    p = 0.3
    m, what = build(impl, dropout=p), f"Transformer(..., dropout={p})"
    try:
        expect_dropout("Transformer", m, p, what=what, hint=PASS_DROPOUT)
        expect_dropout("Transformer", m, p, what=what, training=False,
                       hint="in eval mode every dropout is off: use nn.Dropout modules, not F.dropout(..., "
                            "training=True).")
    except SubmissionFailure as failure:
        raise type(failure)(str(failure) + hint_suffix(tr(PASS_DROPOUT))) from None


# --- any device --------------------------------------------------------------------------------


@pytest.mark.points(1)
@pytest.mark.real_device  # on a CPU, feedback only: a submission can tell the stand-in device from a real one
@pytest.mark.warm_worker  # fake tensors (probes.on_another_device)
@pytest.mark.parametrize("entry", ["forward", "greedy_decode"])
def test_works_for_inputs_on_any_device(impl, ref, device, entry):
    hint = N_("make every new tensor where the input is, torch.full(..., device=src.device), masks with "
              "device=x.device, or register it as a buffer.")
    what = tr("the Transformer") if entry == "forward" else "greedy_decode"
    if device.type == "cuda":  # a real device: the points are earned here, by what comes back, checked here
        m, r = pair(impl, ref, device)
        src, tgt = tokens(SRC_VOCAB, 2, 4, device), tokens(TGT_VOCAB, 2, 3, device)
        if entry == "forward":
            out, expected = call(m, "forward", src, tgt, hint=hint), golden(r, src, tgt)
            # Logits that differ (rather than a crash) say nothing of devices: forward's recipe is the hint.
            assert_close(out, expected.float(), atol=tolerance(r(src, tgt), expected),
                         name=tr("{what} on {device}", what=what, device=device), hint=FORWARD_RECIPE)
        else:
            out = greedy(impl, m, src, 3, 1)  # its tokens are judged by the greedy tests, on this device too
        assert out.device == src.device, tr("{what} returned a tensor on {got} for inputs on {device}.", what=what,
                                            got=out.device, device=src.device)
        return
    # One layer a side and three tokens to decode: fake tensors cost about a millisecond an op.
    m = impl.transformer.Transformer(SRC_VOCAB, TGT_VOCAB, d_model=16, n_heads=2, n_layers=1, d_ff=16, dropout=0.0,
                                     max_seq_len=MAX_SEQ_LEN).eval()
    tokens_of = {"shape": [2, 4], "dtype": "int64"}
    if entry == "forward":
        why = impl.probes.on_another_device(m, tokens_of, {"shape": [2, 3], "dtype": "int64"})
    else:
        why = impl.probes.on_another_device(impl.transformer.greedy_decode, m, tokens_of, 3, 1)
    assert isinstance(why, str) and not why, (
        tr("{what} mixes devices: with the model and its input on another device (the grader's stand-in for a GPU, "
           "'meta'), torch said: {why}.", what=what, why=str(why).rstrip("!. "))
        + hint_suffix(tr(hint) + " " + tr("(Feedback only: on a machine without a GPU this test is worth no points; "
                                          "a run with --device cuda awards them.)"))
    )


def silenced_with_ones(impl, ref, p, T):
    """The submission's Transformer(dropout=p) whose sublayers all give 0 (wo, w2 zero), whose embeddings of
    tokens 0..T-1 times sqrt(d_model) plus pe are all ones, whose final norms are plain and whose generator
    copies the first tgt_vocab features: what reaches encode's output and the logits is dropout(ones), normalised."""
    r = build(ref, dropout=p)
    m = build(impl, dropout=p)
    pe = m.pos.pe
    if not isinstance(pe, torch.Tensor) or pe.dim() != 3 or pe.shape[1] < T or pe.shape[2] != D_MODEL:
        pe = r.pos.pe
    table = torch.zeros(max(SRC_VOCAB, TGT_VOCAB), D_MODEL)
    table[:T] = (1 - pe[0, :T].detach().float().cpu()) / math.sqrt(D_MODEL)
    weights = {}
    for name, value in r.named_parameters():
        if name.endswith(("wo.weight", "w2.weight", "w2.bias", "generator.bias")) or name.endswith("norm.bias"):
            weights[name] = torch.zeros_like(value)
        elif name in ("encoder.norm.weight", "decoder.norm.weight"):
            weights[name] = torch.ones_like(value)
        elif name == "src_embed.weight":
            weights[name] = table[:SRC_VOCAB].clone()
        elif name == "tgt_embed.weight":
            weights[name] = table[:TGT_VOCAB].clone()
        elif name == "generator.weight":
            weights[name] = torch.eye(TGT_VOCAB, D_MODEL)
        else:
            weights[name] = value.detach()
    load_parameters(m, weights, name="Transformer", names_hint="src_embed, tgt_embed, pos, encoder, decoder, generator")
    return m.train()


@pytest.mark.points(1)
@pytest.mark.parametrize("path", ["encode", "forward"])
def test_one_dropout_between_the_embeddings_and_the_output(impl, ref, seed, path):
    """With every sublayer silenced, the only dropout on the way from the embeddings to encode's output (and to
    the logits) is pos's: about p of the normalised values fall below their row's mean, none is exactly 0."""
    p, T, B = 0.3, 8, 64
    impl.torch.manual_seed(seed)  # the worker's draws from this test's seed, whatever ran before it in the worker
    m = silenced_with_ones(impl, ref, p, T)
    tokens_ = torch.arange(T).repeat(B, 1)
    args = (tokens_, *(() if path == "encode" else (tokens_[:, :T],)))
    where = tr("encode's output") if path == "encode" else tr("the logits")
    # First without dropout: the weights make embeddings * sqrt(d_model) + positions 1 everywhere, so every row
    # normalises to 0. If not, what reaches the norm is not that, and no count below can speak of dropout.
    m.eval()
    plain = call(m, path, *args)
    plain = plain[..., :TGT_VOCAB] if path == "forward" else plain
    if float((plain.abs() < 1e-3).all(dim=-1).double().mean()) < 0.95:  # float32 leaves ~1e-5 after the norm
        raise AssertionError(
            (tr("in eval mode, with every sublayer silenced and embeddings the grader chose so that embeddings * "
                "sqrt(d_model) + positions are 1 everywhere, encode's output is not constant along a row, so this "
                "test cannot measure the dropout on the way.") if path == "encode" else
             tr("in eval mode, with every sublayer silenced and embeddings the grader chose so that embeddings * "
                "sqrt(d_model) + positions are 1 everywhere, the logits are not constant along a row, so this test "
                "cannot measure the dropout on the way."))
            + hint_suffix(tr("encode and decode compute pos(embed(tokens) * sqrt(d_model)), then the encoder or "
                             "decoder, and nothing else on that path."))
        )
    m.train()
    out = call(m, path, *args)
    out = out[..., :TGT_VOCAB] if path == "forward" else out
    # A row whose values were all kept is constant, and normalises to 0 up to float32's rounding of embeddings *
    # sqrt(d_model) + positions, as in eval mode ((1-p)^d_model of the rows: a few of 512; a row with any value dropped
    # normalises to values of at least 1/sqrt(d_model - 1) in size). Exactly 0 was asked once, and failed correct
    # models on the draws where such a row came out of the rounding not quite constant.
    constant = (out.abs() < 1e-3).all(dim=-1)
    assert float(constant.double().mean()) < 0.05, (
        tr("in training mode with dropout={p}, nothing was dropped on the way from the embeddings to {where} in "
           "{share} of the positions.", p=p, where=where, share=format(float(constant.double().mean()), ".0%"))
        + hint_suffix(tr("embeddings * sqrt(d_model) + positions go through pos = PositionalEncoding(d_model, "
                         "max_seq_len, dropout), with the model's dropout, on both sides."))
    )
    out = out[~constant]
    assert not bool((out == 0).any()), (
        (tr("in training mode some of encode's output are exactly 0: a dropout acts after the final norm.")
         if path == "encode" else
         tr("in training mode some of the logits are exactly 0: a dropout acts after the final norm or on the "
            "generator."))
        + hint_suffix(tr("the only dropouts are pos's and those inside the encoder's and decoder's parts; none after "
                         "them."))
    )
    below = float((out < 0).double().mean())
    spread = 6 * math.sqrt(p * (1 - p) / out.numel())
    assert abs(below - p) <= spread, (
        tr("in training mode with dropout={p} and every sublayer silenced, {below} of {where} fell below their row's "
           "mean (where eval mode gives none), and pos's dropout alone drops {share}.", p=p,
           below=format(below, ".0%"), where=where, share=format(p, ".0%"))
        + hint_suffix(tr("apply the model's dropout once to embeddings + positions, through pos = "
                         "PositionalEncoding(d_model, max_seq_len, dropout), on both sides, and nowhere else on the "
                         "residual path."))
    )


