"""Hidden tests for exercises/rope.py: long tables, other bases, random shapes and positions, float64, gradients.

The golden is the formula in float64. The tables may be computed in float32 (as Meta's llama does) or in float64
then cast: at position p the float32 angle errs by about p times float32's rounding, so each position gets its own
tolerance, 16 times the worst error of two float32 computations (Meta's 1 / base^(2i/d), and exp(-2i log(base) / d))
up to that position. A rotation by float32 tables is judged at float32 accuracy, in float64 too.
"""

import functools
import math

import pytest
import torch

from grader.testing import (
    EPS32,
    N_,
    assert_close,
    backward,
    expect_tensor,
    expect_tuple,
    hint_on_crash,
    hint_suffix,
    tr,
)

FORMULA = N_("angle[p, i] = p * base^(-2i / head_dim); out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + "
             "x[2i+1] cos.")


def angles64(head_dim: int, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return positions.double()[:, None] * freqs[None, :]


def float32_angles(head_dim: int, max_seq_len: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Two float32 ways to the angles, (max_seq_len, head_dim/2) each."""
    positions = torch.arange(max_seq_len).float()
    meta = torch.outer(positions, 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim)))
    exp_log = positions[:, None] * torch.exp(torch.arange(0, head_dim, 2).float() * (-math.log(base) / head_dim))
    return meta, exp_log


@functools.cache
def per_position_tolerance(head_dim: int, max_seq_len: int, base: float) -> torch.Tensor:
    """(max_seq_len,): 16 times the worst float32 error of the tables up to each position."""
    golden = angles64(head_dim, torch.arange(max_seq_len), base)
    error = torch.zeros(max_seq_len, dtype=torch.float64)
    for angles in float32_angles(head_dim, max_seq_len, base):
        for f in (torch.cos, torch.sin):
            error = torch.maximum(error, (f(angles).double() - f(golden)).abs().amax(dim=-1))
    return (16 * error.cummax(dim=0).values).clamp(min=8 * EPS32)


def rotate64(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x, cos, sin = x.double().cpu(), cos.double().cpu(), sin.double().cpu()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


TABLES = {
    "head_dim 64, 4096 positions": (64, 4096, 10000.0),
    "head_dim 32, base 500000 (llama 3)": (32, 256, 500000.0),
    "head_dim 2, one pair": (2, 9, 10000.0),
    "the default base, 10000": (16, 64, None),  # called without base
}


@pytest.mark.points(2)
@pytest.mark.parametrize(("head_dim", "max_seq_len", "base"), TABLES.values(), ids=TABLES.keys())
def test_tables_match_the_angles_at_every_position(impl, head_dim, max_seq_len, base):
    given = () if base is None else (base,)
    base = base or 10000.0
    with hint_on_crash(FORMULA):
        cos, sin = expect_tuple(impl.rope.rope_tables(head_dim, max_seq_len, *given), 2, name="rope_tables()")
    golden = angles64(head_dim, torch.arange(max_seq_len), base)
    tol = per_position_tolerance(head_dim, max_seq_len, base)
    for index, (table, want) in enumerate(((cos, golden.cos()), (sin, golden.sin()))):
        table = expect_tensor(table, name="rope_tables()").detach().cpu()
        name = f"rope_tables({', '.join(map(str, (head_dim, max_seq_len, *given)))})[{index}]"
        if tuple(table.shape) != tuple(want.shape) or table.dtype != torch.float32:
            assert_close(table, want.float(), atol=1.0, name=name)
        error = (table.double() - want).abs().amax(dim=-1)
        off = ~(error <= tol)  # NaN counts as off
        if off.any():
            p = int(off.nonzero()[0])
            assert_close(table[p], want[p], atol=float(tol[p]), name=f"{name}[{p}]", check_dtype=False,
                         hint=tr("{off} of {count} positions are off, the first is position {p}.", off=int(off.sum()),
                                 count=max_seq_len, p=p) + " " + tr(FORMULA)
                         + ("" if given else " " + tr("Called without base, rope_tables takes base = 10000.0.")))


def random_case(generator: torch.Generator, max_seq_len: int):
    """Leading dims (0 to 3 of them), a length, and positions in any order, repeats allowed."""
    lead = torch.randint(1, 4, (int(torch.randint(0, 4, (1,), generator=generator)),), generator=generator).tolist()
    T = int(torch.randint(1, 9, (1,), generator=generator))
    positions = torch.randint(0, max_seq_len, (T,), generator=generator)
    return (*lead, T), positions


@pytest.mark.points(3)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_apply_rope_at_random_shapes_and_positions(impl, device, seed, dtype):
    generator = torch.Generator().manual_seed(seed)
    head_dim, max_seq_len = 12, 300
    golden = angles64(head_dim, torch.arange(max_seq_len))
    cos, sin = golden.cos().float(), golden.sin().float()  # the contract's tables
    for _ in range(4):
        shape, positions = random_case(generator, max_seq_len)
        x = torch.randn(*shape, head_dim, generator=generator).to(device, dtype)
        with hint_on_crash(FORMULA):
            out = expect_tensor(impl.rope.apply_rope(x, cos.to(device), sin.to(device), positions.to(device)),
                                name="apply_rope()")
        assert out.dtype == dtype, tr("for x in {dtype} apply_rope returns {got}, expected {dtype}.", dtype=dtype,
                                      got=out.dtype)
        expected = rotate64(x, cos[positions], sin[positions])
        assert_close(out, expected.to(dtype), atol=32 * EPS32 * max(1.0, expected.abs().max().item()), hint=FORMULA,
                     name=tr("apply_rope(x) for x of shape {shape} at positions {positions}",
                             shape=tuple(x.shape), positions=positions.tolist()))


@pytest.mark.points(2)
def test_gradient_is_the_rotation_back(impl, device, seed):
    """The rotation is orthogonal: the gradient of x is grad_output rotated by -angle."""
    head_dim = 8
    golden = angles64(head_dim, torch.arange(16))
    cos, sin = golden.cos().float(), golden.sin().float()
    x = torch.randn(2, 3, 6, head_dim, device=device).requires_grad_(True)
    grad_output = torch.randn(2, 3, 6, head_dim, device=device)
    positions = torch.tensor([2, 3, 5, 8, 13, 15])
    grads = backward(impl.rope.apply_rope, x, cos.to(device), sin.to(device), positions.to(device),
                     grad_output=grad_output).inputs
    assert grads[0] is not None, tr("no gradient reached x: keep the rotation in torch, without .detach() or .data.")
    expected = rotate64(grad_output, cos[positions], -sin[positions])
    assert_close(grads[0], expected.float(), atol=32 * EPS32 * max(1.0, expected.abs().max().item()),
                 name="the gradient of x", hint="compute the rotation with differentiable torch operations "
                                                "(slices, stack, cat, complex products), never in place on x.")


@pytest.mark.points(2)
def test_relative_scores_at_random_shifts(impl, device, seed):
    generator = torch.Generator().manual_seed(seed)
    head_dim, max_seq_len = 16, 512
    module = impl.rope.RotaryEmbedding(head_dim, max_seq_len).to(device)
    q, k = torch.randn(2, 1, 16, generator=generator).to(device), torch.randn(2, 1, 16, generator=generator).to(device)
    tol = float(per_position_tolerance(head_dim, max_seq_len, 10000.0)[-1]) * 4 * 16
    for _ in range(3):
        m, n = torch.randint(0, 200, (2,), generator=generator).tolist()
        shift = int(torch.randint(1, 300, (1,), generator=generator))
        scores = []
        for offset in (0, shift):
            with hint_on_crash(FORMULA):
                q_m, _ = expect_tuple(module(q, q, torch.tensor([m + offset]).to(device)), 2, name="RotaryEmbedding()")
                _, k_n = expect_tuple(module(k, k, torch.tensor([n + offset]).to(device)), 2, name="RotaryEmbedding()")
            q_m, k_n = expect_tensor(q_m, name="q"), expect_tensor(k_n, name="k")
            scores.append((q_m.double() * k_n.double()).sum(-1))
        assert_close(scores[1], scores[0], atol=tol, check_dtype=False,
                     name=tr("the score of a query at {m} and a key at {n}, both shifted by {shift}", m=m, n=n,
                             shift=shift),
                     hint="rotate queries and keys with the same frequencies, each by its own position.")


@pytest.mark.points(2)
@pytest.mark.parametrize("base", [None, 100.0], ids=["default base", "base 100"])
def test_module_in_float64_rotates_as_the_formula(impl, device, seed, base):
    """RotaryEmbedding(...).to(torch.float64) moves its buffers, and rotates float64 queries and keys."""
    head_dim, max_seq_len = 8, 40
    args = () if base is None else (base,)
    module = impl.rope.RotaryEmbedding(head_dim, max_seq_len, *args).to(device, torch.float64)
    q, k = (torch.randn(3, 2, 7, head_dim, dtype=torch.float64, device=device) for _ in range(2))
    positions = torch.tensor([0, 1, 4, 9, 16, 25, 36])
    with hint_on_crash(FORMULA):
        out = expect_tuple(module(q, k, positions.to(device)), 2, name="RotaryEmbedding(q, k, positions)")
    golden = angles64(head_dim, positions, base or 10000.0)
    tol = float(per_position_tolerance(head_dim, max_seq_len, base or 10000.0)[-1]) * 4
    hint = N_("the default base is 10000.0; the buffers cos and sin move with .to(), so float64 queries come back "
              "float64.")
    for index, (before, after) in enumerate(((q, out[0]), (k, out[1]))):
        assert_close(after, rotate64(before, golden.cos(), golden.sin()), atol=tol, hint=hint,
                     name=f"RotaryEmbedding({head_dim}, {max_seq_len}).double()(q, k, positions)[{index}]")


@pytest.mark.points(1)
def test_default_positions_are_zero_to_T_minus_one(impl, device, seed):
    module = impl.rope.RotaryEmbedding(8, 16).to(device)
    q, k = torch.randn(2, 5, 8, device=device), torch.randn(2, 5, 8, device=device)
    with hint_on_crash(FORMULA):
        default = expect_tuple(module(q, k), 2, name="RotaryEmbedding(q, k)")
        given = expect_tuple(module(q, k, torch.arange(5).to(device)), 2, name="RotaryEmbedding(q, k, positions)")
    for index in range(2):
        assert_close(default[index], expect_tensor(given[index], name="RotaryEmbedding(q, k, positions)"),
                     atol=8 * EPS32, name=f"RotaryEmbedding(8, 16)(q, k)[{index}]",
                     hint="without positions, token t sits at position t: the first T rows of the tables.")


@pytest.mark.confirmed_by("test_module_in_float64_rotates_as_the_formula")
@pytest.mark.points(1)
def test_tables_follow_the_module_to_float64(impl):
    module = impl.rope.RotaryEmbedding(8, 16).to(torch.float64)
    for name in ("cos", "sin"):
        table = expect_tensor(getattr(module, name), name=f"RotaryEmbedding.{name}")
        assert table.dtype == torch.float64, (
            tr("after .to(torch.float64) the table {name} is still {dtype}: it does not move with the module.",
               name=name, dtype=table.dtype)
            + hint_suffix(tr("register the tables as buffers (self.register_buffer), which .to(device) and .double() "
                             "move, as they move the parameters.")))
