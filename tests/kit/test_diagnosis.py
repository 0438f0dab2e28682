"""Mistake diagnosis, in-process and cheap: every known mistake is recognised as itself and as nothing
else, and correct code (the reference and every correct variant) is never diagnosed.

The catalogue grading test checks the same on the real path (sandboxed worker, failure messages) for
the mistakes; correct variants keep full marks there, so no failure ever asks for their diagnosis,
and this file is where their matching is checked.
"""

from __future__ import annotations

import itertools
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.judge import diagnosis, variants

EXERCISES = sorted(diagnosis.SCENARIOS)


pytestmark = pytest.mark.usefixtures("one_thread")


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
        assert _names(variant) == [], f"correct {exercise}/{variant.name} diagnosed as {_names(variant)}"


def _names(variant: variants.Variant) -> list[str]:
    """The names of the known mistakes the variant is diagnosed with, in-process."""
    module = diagnosis.load_variant(variant)
    return [m.name for m in diagnosis.diagnose(variant.exercise, diagnosis.Library({variant.exercise: module}))]


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


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_two_mistakes_are_told_apart(exercise: str):
    """For every pair, some facet puts them further apart than any one submission can be from both: agreeing with
    one (within a tolerance where it differs from the reference, SEPARATION + 1 elsewhere) rules the other out."""
    known = diagnosis.known_facets(exercise)
    assert known is not None

    def reach(name: str, differs: tuple[str, ...]) -> float:
        return (1.0 if name in differs else diagnosis.SEPARATION + 1.0) * known.tolerances[name]

    for (a, a_differs, a_facets), (b, b_differs, b_facets) in itertools.combinations(known.mistakes, 2):
        assert any(diagnosis.distance(a_facets[name], b_facets[name]) > reach(name, a_differs) + reach(name, b_differs)
                   for name in known.reference), f"no facet of {exercise}'s scenario tells {a.name} from {b.name}"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_scenario_tries_several_shapes_and_float64(exercise: str):
    """One shape can make two mistakes coincide (head_dim = sqrt(dim) makes scaling twice look like scaling by
    sqrt(dim)): each scenario calls the exercise at several shapes, and once in float64."""
    tensors = [t for value in diagnosis.known_facets(exercise).reference.values() for t in _tensors(value)]
    assert torch.float64 in {t.dtype for t in tensors}, f"{exercise}'s scenario has no float64 output"
    shapes = {tuple(t.shape) for t in tensors if t.is_floating_point() and t.dim() >= 2}
    assert len(shapes) >= 2, f"{exercise}'s scenario tries one shape only: {shapes}"


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _tensors(item)] if isinstance(value, tuple) else []


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_mistake_is_named_only_where_it_raises_the_same_kind_of_error(exercise: str):
    """Where a known mistake raises, a submission that raises something else at that call is not that mistake."""
    known = diagnosis.known_facets(exercise)
    raising = [(mistake, facets, name) for mistake, differs, facets in known.mistakes for name in differs
               if isinstance(facets[name], diagnosis.Raised)]
    if not raising:
        pytest.skip(f"no known mistake of {exercise} raises in its scenario")
    for mistake, facets, name in raising:
        assert diagnosis.match(known, dict(facets)) == (mistake,)
        other = "TypeError" if facets[name].error != "TypeError" else "IndexError"
        assert diagnosis.match(known, {**facets, name: diagnosis.Raised(other)}) == (), (
            f"{exercise}/{mistake.name} named for a submission that raises {other} at {name!r}")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_held_out_mistakes_are_given_no_name(exercise: str):
    """Realistic slips written for this test and kept out of the catalogue (`submissions/<exercise>/held_out.py`),
    among them the ones a single-scenario diagnosis got wrong: scores scaled twice (told 'divided by sqrt(dim)'),
    cross-attention keys from the decoder's own stream ('masks swapped'), only the source embeddings scaled
    ('decode drops the memory'). Whatever they raise or differ in, none is a known mistake."""
    held_out = variants.held_out_mistakes(exercise)
    assert held_out, f"no held-out mistakes of {exercise}"
    for variant in held_out:
        assert _names(variant) == [], f"held-out {exercise}/{variant.name} diagnosed as {_names(variant)}"


def test_a_chinese_grading_names_the_mistake_an_english_one_does(grader_cli, grader_env, tmp_path: Path):
    """A facet that raised in the worker is compared by the exception's type, which the worker names as data, never
    read back from the failure's words: in Chinese they say 抛出了, and a diagnosis that parsed "raised" named no
    mistake for a Chinese student where an English one got it (attention's dropout on the output: its fixed-dropout
    facet raises). Graded as a student runs it, with GRADER_LANG=zh."""
    from grader.host.failures import submission_failure
    from grader.host.limits import Limits
    from grader.judge.diagnosis.observe import Raised, attempt
    from grader.lang import use

    use("zh")
    try:
        failure = submission_failure({"type": "RuntimeError", "message": "shapes"}, "attention.attention()", Limits())
    finally:
        use("en")
    assert "RuntimeError" in str(failure) and " raised " not in str(failure), str(failure)

    def raises():
        raise failure

    assert attempt(raises) == Raised("RuntimeError")
    submission = tmp_path / "submission"
    variants.write(next(v for v in variants.mistakes("attention") if v.name == "dropout_on_output"), submission)
    environment = {**grader_env, "GRADER_LANG": "zh"}
    run = grader_cli.run("check", "attention", "--quick", "--submission", str(submission),
                         json_path=tmp_path / "report.json", env=environment)
    assert run.report and run.report["exercises"][0]["diagnosed"] == ["dropout_on_output"], run.describe()
    assert "诊断" in run.stdout, run.stdout



def test_the_observed_catalogue_kept_on_disk_is_what_was_computed(monkeypatch, tmp_path: Path):
    """A diagnosis reads each exercise's observed catalogue from the user's cache once it was computed: the same
    facets, tolerances and differences, loss for loss, for every exercise; readable by this user alone; a file that
    does not read, or names another exercise, is computed again, never half trusted."""
    from grader.judge.diagnosis import compare, stored

    monkeypatch.setattr(stored, "folder", lambda: tmp_path / "facets")
    computed_attention = None
    for exercise in EXERCISES:
        compare.known_facets.cache_clear()
        computed = compare.known_facets(exercise)
        computed_attention = computed_attention or computed
        compare.known_facets.cache_clear()
        read = compare.known_facets(exercise)
        assert read is not computed and read.tolerances == computed.tolerances and read.costly == computed.costly
        pairs = [(read.reference, computed.reference),
                 *((r.facets, c.facets) for r, c in zip(read.mistakes, computed.mistakes, strict=True))]
        assert all(r.keys() == c.keys() and all(diagnosis.distance(r[k], c[k]) == 0 for k in c) for r, c in pairs)
        assert [(m.mistake, m.differs) for m in read.mistakes] == [(m.mistake, m.differs) for m in computed.mistakes]
    kept = sorted((tmp_path / "facets").iterdir())
    assert len(kept) == len(EXERCISES) and (tmp_path / "facets").stat().st_mode & 0o777 == 0o700
    assert all(path.stat().st_mode & 0o777 == 0o600 for path in kept)
    attention = next(path for path in kept if path.name.startswith("attention-"))
    assert stored.load("attention", "cpu") is not None and stored.load("masking", "cpu") is not None
    shutil.copyfile(attention, attention.with_name(attention.name.replace("attention-", "masking-")))
    assert stored.load("masking", "cpu") is None  # another exercise's facets under masking's name
    attention.write_bytes(attention.read_bytes()[:100])  # cut short
    assert stored.load("attention", "cpu") is None
    compare.known_facets.cache_clear()
    assert compare.known_facets("attention").tolerances == computed_attention.tolerances  # computed again
    compare.known_facets.cache_clear()
