"""Public tests for exercises/rope.py: the tables, the rotation of each pair, and the properties RoPE exists for.

Run them with `grader check rope`. They need no reference solution: the tables are checked against the angles
computed here in float64, the rotation against the formula applied here to the very tables it was given, and the
module by its properties (scores that depend only on the distance, lengths kept, position 0 unchanged).
"""

import pytest
import torch

from grader.testing import (
    EPS32,
    N_,
    assert_close,
    describe,
    expect_tensor,
    expect_tuple,
    hint_on_crash,
    hint_suffix,
    only_match,
    tr,
)

FORMULA = N_("pair i is features (2i, 2i+1): out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + x[2i+1] cos, "
             "the angle p * base^(-2i / head_dim) of the token's position p.")
# What the output matches, where it is one of these and no other (grader.judge.claims.only_match).
CAUSES = {
    "half-split": N_("It matches the output of the half-split pairing, Hugging Face's rotate_half (feature i with "
                     "feature i + head_dim/2): this kit uses the interleaved pairs of RoFormer and Meta's llama, "
                     "(2i, 2i+1), x[..., 0::2] and x[..., 1::2]."),
    "backwards": N_("It matches the output of a rotation the other way, by -angle: out[2i] = x[2i] cos - x[2i+1] sin, "
                    "with the minus on the sin term of the even feature."),
}


def angles64(head_dim: int, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """The angles in float64: (T, head_dim/2), angle[p, i] = p * base^(-2i / head_dim)."""
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return positions.double()[:, None] * freqs[None, :]


def tables32(head_dim: int, max_seq_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Tables as a float32 computation makes them (Meta's llama: 1 / base^(2i/d), an outer product in float32)."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(max_seq_len).float(), freqs)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "interleaved") -> torch.Tensor:
    """The rotation written out, in x's dtype, with cos and sin (T, head_dim/2) already at x's positions."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if pairing == "half-split":
        half = x.size(-1) // 2
        a, b = x[..., :half], x[..., half:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    if pairing == "backwards":
        sin = -sin
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def rotated_wrongly(out: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, atol: float) -> str:
    """The hint for a wrong rotation: the one known cause it matches, else the formula."""
    x64 = x.double().cpu()
    cause = only_match(out, {name: rotate(x64, cos.cpu(), sin.cpu(), name) for name in CAUSES}, atol=atol)
    return CAUSES[cause] if cause is not None else FORMULA


def check_rotation(out, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, name: str, atol: float) -> None:
    """out == the rotation of x by (cos, sin), x's dtype; a wrong one told the convention it matches, if any."""
    out = expect_tensor(out, name=name)
    expected = rotate(x.double().cpu(), cos.cpu(), sin.cpu())
    if tuple(out.shape) == tuple(x.shape) and out.dtype == x.dtype:
        error = (out.detach().double().cpu() - expected).abs()
        if not bool((error <= atol).all()):  # NaN counts as off
            assert_close(out, expected.to(x.dtype), atol=atol, name=name,
                         hint=rotated_wrongly(out, x, cos, sin, atol))
        return
    assert_close(out, expected.to(x.dtype), atol=atol, name=name, hint=FORMULA)


def call(fn, *args, **kwargs):
    with hint_on_crash(FORMULA):
        return fn(*args, **kwargs)


# --- rope_tables ----------------------------------------------------------------------------------


@pytest.mark.points(1)
def test_tables_have_shape_max_seq_len_by_half_head_dim_in_float32(impl):
    cos, sin = expect_tuple(call(impl.rope.rope_tables, 8, 20), 2, name="rope_tables(8, 20)")
    for name, table in (("cos", cos), ("sin", sin)):
        table = expect_tensor(table, name=name)
        assert tuple(table.shape) == (20, 4), (
            tr("rope_tables(8, 20) gives {name} of shape {shape}, expected (20, 4) = (max_seq_len, head_dim // 2).",
               name=name, shape=tuple(table.shape))
            + hint_suffix(tr("one row per position, one column per pair of features: the outer product of the "
                             "positions and the head_dim // 2 frequencies.")))
        assert table.dtype == torch.float32, (
            tr("rope_tables gives {name} in {dtype}, expected float32.", name=name, dtype=table.dtype)
            + hint_suffix(tr("compute the angles in float32, or compute them in float64 and cast the tables with "
                             ".float(): float32 tables keep float32 queries float32.")))


@pytest.mark.points(2)
@pytest.mark.parametrize(("head_dim", "max_seq_len", "base"), [(8, 20, 10000.0), (16, 64, 100.0)],
                         ids=["head_dim 8, base 10000", "head_dim 16, base 100"])
def test_tables_hold_the_cos_and_sin_of_p_times_base_to_the_minus_2i_over_head_dim(impl, head_dim, max_seq_len,
                                                                                     base):
    cos, sin = expect_tuple(call(impl.rope.rope_tables, head_dim, max_seq_len, base), 2,
                            name=f"rope_tables({head_dim}, {max_seq_len}, {base})")
    angles = angles64(head_dim, torch.arange(max_seq_len), base)
    cos32, sin32 = tables32(head_dim, max_seq_len, base)
    atol = max(16 * (cos32.double() - angles.cos()).abs().max().item(),
               16 * (sin32.double() - angles.sin()).abs().max().item(), 8 * EPS32)
    hint = N_("angle[p, i] = p * base^(-2i / head_dim) for pair i = 0 .. head_dim/2 - 1: the exponent steps by "
              "2/head_dim (torch.arange(0, head_dim, 2) / head_dim), and the base is the argument, not always 10000.")
    assert_close(cos, angles.cos(), atol=atol, name=f"rope_tables({head_dim}, {max_seq_len}, {base})[0]",
                 check_dtype=False, hint=hint)
    assert_close(sin, angles.sin(), atol=atol, name=f"rope_tables({head_dim}, {max_seq_len}, {base})[1]",
                 check_dtype=False, hint=hint)


# --- apply_rope -----------------------------------------------------------------------------------


@pytest.mark.points(3)
@pytest.mark.parametrize("shape", [(2, 3, 7, 8), (5, 6)], ids=["(B, n_heads, T, head_dim)", "(T, head_dim)"])
def test_apply_rope_rotates_each_adjacent_pair_by_its_angle(impl, device, seed, shape):
    x = torch.randn(*shape, device=device)
    cos, sin = tables32(shape[-1], 16)
    T = shape[-2]
    out = call(impl.rope.apply_rope, x, cos.to(device), sin.to(device))
    check_rotation(out, x, cos[:T], sin[:T], atol=32 * EPS32 * 8,
                   name=tr("apply_rope(x) for x of shape {shape}", shape=shape))


@pytest.mark.hint_after("test_apply_rope_rotates_each_adjacent_pair_by_its_angle")  # the same, at other positions
@pytest.mark.points(2)
def test_apply_rope_uses_the_positions_it_is_given(impl, device, seed):
    x = torch.randn(2, 4, 8, device=device)
    cos, sin = tables32(8, 32)
    positions = torch.tensor([5, 6, 7, 19])
    out = call(impl.rope.apply_rope, x, cos.to(device), sin.to(device), positions.to(device))
    out = expect_tensor(out, name="apply_rope(x, cos, sin, positions)")
    hint = N_("token t takes rows positions[t] of cos and sin (cos[positions]), not row t: a KV cache's new tokens "
              "sit after the ones already seen.")
    expected = rotate(x.double().cpu(), cos[positions], sin[positions])
    assert_close(out, expected.to(x.dtype), atol=32 * EPS32 * 8, hint=hint,
                 name="apply_rope(x, cos, sin, positions=[5, 6, 7, 19])")


@pytest.mark.points(1)
def test_position_zero_is_left_unchanged(impl, device, seed):
    x = torch.randn(3, 1, 8, device=device)
    cos, sin = tables32(8, 4)
    out = call(impl.rope.apply_rope, x, cos.to(device), sin.to(device))
    assert_close(out, x, atol=8 * EPS32, name="apply_rope(x) at position 0",
                 hint="at position 0 every angle is 0 (cos 1, sin 0): the rotation leaves x as it is.")


@pytest.mark.points(1)
def test_float64_queries_stay_float64_at_float32_accuracy(impl, device, seed):
    x = torch.randn(2, 6, 8, dtype=torch.float64, device=device)
    cos, sin = tables32(8, 6)
    out = expect_tensor(call(impl.rope.apply_rope, x, cos.to(device), sin.to(device)), name="apply_rope(x)")
    assert out.dtype == torch.float64, (
        tr("for a float64 x apply_rope returns {dtype}, expected float64.", dtype=out.dtype)
        + hint_suffix(tr("compute in x's dtype (cos.to(x.dtype)) or cast the result back: out.type_as(x).")))
    # Float32 tables (and Meta's float32 complex product) make float32 accuracy the right measure here.
    check_rotation(out, x, cos, sin, name=tr("apply_rope(x) for a float64 x"), atol=32 * EPS32 * 8)


# --- RotaryEmbedding ------------------------------------------------------------------------------


def rotary(impl, device, head_dim=8, max_seq_len=32):
    return impl.rope.RotaryEmbedding(head_dim, max_seq_len).to(device)


def module_atol(head_dim: int, max_seq_len: int, scale: float) -> float:
    """What a module's own float32 tables may err by (however computed), times the size of the inputs."""
    angles = angles64(head_dim, torch.arange(max_seq_len))
    cos32, sin32 = tables32(head_dim, max_seq_len)
    error = max((cos32.double() - angles.cos()).abs().max().item(), (sin32.double() - angles.sin()).abs().max().item())
    return 16 * (error + EPS32) * 2 * scale


@pytest.mark.points(3)
def test_rotary_embedding_rotates_queries_and_keys_by_their_positions(impl, device, seed):
    module = rotary(impl, device)
    q, k = torch.randn(2, 4, 5, 8, device=device), torch.randn(2, 2, 5, 8, device=device)  # k with fewer heads
    positions = torch.tensor([3, 4, 5, 6, 9])
    with hint_on_crash(N_("forward(q, k, positions) returns (apply_rope(q, ...), apply_rope(k, ...)) with the module's "
                          "buffers cos and sin.")):
        out = expect_tuple(module(q, k, positions.to(device)), 2, name="RotaryEmbedding(8, 32)(q, k, positions)")
    angles = angles64(8, positions)
    atol = module_atol(8, 32, max(q.abs().max().item(), k.abs().max().item()))
    for index, (name, before, after) in enumerate((("q", q, out[0]), ("k", k, out[1]))):
        after = expect_tensor(after, name=name)
        if tuple(after.shape) == tuple(before.shape) and torch.allclose(after.double().cpu(), before.double().cpu()):
            raise AssertionError(tr("RotaryEmbedding returned {name} unrotated.", name=name)
                                 + hint_suffix(tr("rotate the keys as well as the queries: the score q . k is relative "
                                                  "only when both turn by their own positions.")))
        check_rotation(after, before, angles.cos(), angles.sin(), atol=atol,
                       name=f"RotaryEmbedding(8, 32)(q, k, positions=[3, 4, 5, 6, 9])[{index}]")


@pytest.mark.points(2)
def test_scores_depend_only_on_the_distance_between_query_and_key(impl, device, seed):
    """q at position m and k at position n, then both shifted by s: the score is the same."""
    module = rotary(impl, device, head_dim=16, max_seq_len=64)
    q, k = torch.randn(1, 1, 6, 16, device=device), torch.randn(1, 1, 6, 16, device=device)
    positions = torch.tensor([0, 1, 2, 5, 9, 10])
    scores = []
    for shift in (0, 7, 40):
        with hint_on_crash(N_("forward(q, k, positions) rotates q and k with the same positions.")):
            q_rot, k_rot = expect_tuple(module(q, k, (positions + shift).to(device)), 2, name="RotaryEmbedding(q, k)")
        q_rot, k_rot = expect_tensor(q_rot, name="q"), expect_tensor(k_rot, name="k")
        scores.append(q_rot.double() @ k_rot.double().transpose(-2, -1))
    atol = module_atol(16, 64, 16.0) * 16
    for shift, shifted in zip((7, 40), scores[1:], strict=True):
        assert_close(shifted, scores[0], atol=atol, check_dtype=False,
                     name=tr("the scores q_rot @ k_rot^T with every position shifted by {shift}", shift=shift),
                     hint="rotating q at m and k at n leaves q . k depending on m - n only, when both turn by the "
                          "same frequencies at their own positions: rotate the keys too, with the same tables.")


@pytest.mark.points(1)
def test_rotation_keeps_the_length_of_every_query(impl, device, seed):
    module = rotary(impl, device)
    q = torch.randn(2, 3, 10, 8, device=device) * 3
    with hint_on_crash(FORMULA):
        q_rot, _ = expect_tuple(module(q, q), 2, name="RotaryEmbedding(8, 32)(q, q)")
    q_rot = expect_tensor(q_rot, name="q")
    assert_close(q_rot.double().norm(dim=-1) if q_rot.shape == q.shape else q_rot, q.double().norm(dim=-1),
                 atol=module_atol(8, 32, 30.0), check_dtype=False, name="the length of each rotated query",
                 hint="a rotation keeps lengths: cos^2 + sin^2 = 1 for each pair (2i, 2i+1), with the same angle for "
                      "both features of a pair.")


@pytest.mark.confirmed_by("test_rotary_embedding_rotates_queries_and_keys_by_their_positions")
@pytest.mark.points(1)
def test_cos_and_sin_are_float32_buffers(impl):
    info = describe(impl.rope.RotaryEmbedding(8, 32))
    for name in ("cos", "sin"):
        if name in info.parameters:
            raise AssertionError(tr("{name} is an nn.Parameter, so an optimiser would train it.", name=name)
                                 + hint_suffix(tr("the tables are fixed: self.register_buffer('cos', cos).")))
        if name not in info.buffers:
            found = sorted(info.buffers) or tr("none")
            raise AssertionError(
                tr("RotaryEmbedding has no buffer named {name} (its buffers: {found}).", name=name, found=found)
                + hint_suffix(tr("self.register_buffer('cos', cos), not self.cos = cos: a plain attribute is not "
                                 "moved by .to(device) nor saved in state_dict.")))
        shape, dtype = tuple(info.buffers[name]["shape"]), info.buffers[name]["dtype"]
        assert shape == (32, 4) and dtype == "float32", tr(
            "the buffer {name} is {dtype} of shape {shape}, expected float32 of shape (32, 4) = (max_seq_len, "
            "head_dim // 2).", name=name, dtype=dtype, shape=shape)
