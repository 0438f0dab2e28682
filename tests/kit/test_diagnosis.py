"""Mistake diagnosis, in-process and cheap: every known mistake is recognised as itself and as nothing
else, and correct code (the reference and every correct variant) is never diagnosed.

The catalogue grading test checks the same on the real path (sandboxed worker, failure messages) for
the mistakes; correct variants keep full marks there, so no failure ever asks for their diagnosis,
and this file is where their matching is checked.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.judge import diagnosis, variants

EXERCISES = sorted(diagnosis.SCENARIOS)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_every_exercise_has_a_catalogue_and_every_mistake_a_short_diagnosis():
    assert [exercise for exercise in EXERCISES if variants.mistakes(exercise)] == EXERCISES
    for mistake in (mistake for exercise in EXERCISES for mistake in variants.mistakes(exercise)):
        path, text = f"{mistake.exercise}/{mistake.name}", mistake.diagnosis or ""
        assert "\n" not in text and len(text) <= 200, f"{path}: keep the diagnosis to one short sentence"
        assert ":" in text, f"{path}: say what is wrong, then (after a colon) what to do"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_each_mistake_is_diagnosed_as_itself_alone(exercise: str):
    known = diagnosis.known_facets(exercise)
    assert known is not None and len(known.mistakes) == len(variants.mistakes(exercise))
    for mistake, differs, _ in known.mistakes:
        assert differs, f"{exercise}/{mistake.name} behaves like the reference on every facet of its scenario"
        got = diagnosis.diagnose(exercise, diagnosis.Library({exercise: mistake.module}))
        assert [m.name for m in got] == [mistake.name], f"{exercise}/{mistake.name} diagnosed as {got}"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_correct_code_is_never_diagnosed(exercise: str, tmp_path: Path):
    assert diagnosis.diagnose(exercise, diagnosis.REFERENCE) == ()
    correct = variants.correct_variants(exercise)
    assert correct, f"no correct variants of {exercise} to check"
    for variant in correct:
        module = diagnosis.load_variant(variant)
        got = diagnosis.diagnose(exercise, diagnosis.Library({exercise: module}))
        assert got == (), f"correct {exercise}/{variant.name} diagnosed as {[m.name for m in got]}"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_tolerances_are_derived_and_finite(exercise: str):
    known = diagnosis.known_facets(exercise)
    assert known is not None
    for name, tol in known.tolerances.items():
        assert math.isfinite(tol), f"{exercise} facet {name!r}: the float32 and float64 references disagree"
        value = known.reference[name]
        assert not isinstance(value, diagnosis.Raised), f"{exercise} facet {name!r}: the reference raised {value}"
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            assert 0 < tol < 1e-3, f"{exercise} facet {name!r}: tolerance {tol:.3g} is not a float32 rounding error"


def test_what_no_mistake_explains_gets_no_diagnosis():
    # attention returns a string, masking is missing: every facet differs, none like a known mistake.
    garbage = SimpleNamespace(attention=SimpleNamespace(attention=lambda *args, **kwargs: "not a tensor"))
    for exercise in ("attention", "masking"):
        assert diagnosis.diagnose(exercise, garbage) == ()


def test_a_scaled_copy_of_the_reference_is_not_the_nearest_mistake():
    import solutions.attention as reference

    def scaled(*args, **kwargs):
        output, p_attn = reference.attention(*args, **kwargs)
        return output * 1.5, p_attn * 1.5

    submission = SimpleNamespace(attention=SimpleNamespace(attention=scaled), probes=diagnosis.REFERENCE.probes)
    assert diagnosis.diagnose("attention", submission) == ()


def test_scores_scaled_twice_are_not_told_they_are_divided_by_sqrt_dim():
    """Dividing by head_dim (sqrt(head_dim) twice) equals dividing by sqrt(dim) when head_dim = sqrt(dim), as with
    16 features in 4 heads: a scenario of another shape keeps the two apart, so this held-out mistake is not named."""
    source = (Path(__file__).resolve().parents[2] / "solutions" / "multi_head_attention.py").read_text()
    twice = source.replace("/ math.sqrt(self.head_dim)", "/ math.sqrt(self.head_dim) / math.sqrt(self.head_dim)")
    assert twice != source
    module = diagnosis.load_variant(variants.Variant("multi_head_attention", "scaled_twice", twice, None,
                                                     Path(__file__)))
    got = diagnosis.diagnose("multi_head_attention", diagnosis.Library({"multi_head_attention": module}))
    assert got == (), f"scaled twice diagnosed as {[m.name for m in got]}"


@pytest.mark.parametrize("exercise, edit", [
    ("decoder", ("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, y, memory, src_mask)")),
    ("transformer", ("y = self.tgt_embed(tgt) * math.sqrt(self.d_model)", "y = self.tgt_embed(tgt)")),
], ids=["cross-attention keys from its own stream", "only the source embeddings scaled"])
def test_a_bug_that_differs_where_a_known_mistake_does_is_not_given_its_name(exercise, edit):
    """Each raises or differs from the reference in the facets where a catalogued mistake does ('src_mask and
    tgt_mask are swapped', 'decode drops the memory'), and elsewhere not as that mistake does: no name."""
    source = (Path(__file__).resolve().parents[2] / "solutions" / f"{exercise}.py").read_text()
    held_out = source.replace(*edit)
    assert held_out != source
    module = diagnosis.load_variant(variants.Variant(exercise, "held_out", held_out, None, Path(__file__)))
    got = diagnosis.diagnose(exercise, diagnosis.Library({exercise: module}))
    assert got == (), f"diagnosed as {[m.name for m in got]}"
