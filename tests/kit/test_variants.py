"""The catalogue still describes real files: every known mistake and every edited correct variant applies
to today's reference (each edit's old text exactly once), and every mistake changes the reference.

A reference solution that is reworded can silently detach an edit; this file names the variant and the
edit that no longer applies, so that the catalogue is updated with the reference.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.curriculum import EXERCISES
from grader.judge import variants

REFERENCE = Path(__file__).resolve().parents[2] / "solutions"
IDS = [exercise.id for exercise in EXERCISES]


@pytest.mark.parametrize("exercise", IDS)
def test_every_mistake_applies_to_the_reference_and_changes_it(exercise: str):
    found = variants.mistakes(exercise)  # raises EditDoesNotApply, naming the variant and the edit
    assert found, f"{exercise} has no known mistakes in solutions/mistakes/{exercise}.py"
    reference = (REFERENCE / f"{exercise}.py").read_text()
    for mistake in found:
        assert mistake.source != reference, f"{exercise}/{mistake.name} is the reference itself"
        ast.parse(mistake.source, filename=f"{exercise}/{mistake.name}")
        assert mistake.diagnosis, f"{exercise}/{mistake.name} has no diagnosis"
    names = [m.name for m in found]
    assert len(set(names)) == len(names), f"{exercise}: two mistakes share a name in {names}"


@pytest.mark.parametrize("exercise", IDS)
def test_every_correct_variant_applies_to_the_reference(exercise: str):
    found = variants.correct_variants(exercise)
    assert found, f"no correct variants of {exercise}"
    for variant in found:
        assert variant.diagnosis is None
        ast.parse(variant.source, filename=f"{exercise}/{variant.name}")


def test_an_edit_that_no_longer_applies_is_named():
    with pytest.raises(variants.EditDoesNotApply, match=r"attention/moved: .*'p_attn' .* matches \d+ times"):
        variants.apply("p_attn = p_attn\n", [("p_attn", "weights")], variant="attention/moved")
    with pytest.raises(variants.EditDoesNotApply, match="matches 0 times"):
        variants.apply("scores\n", [("weights", "p_attn")], variant="attention/moved")


def test_a_variant_is_written_as_its_exercise_file(tmp_path: Path):
    mistake = variants.mistakes("attention")[0]
    path = variants.write(mistake, tmp_path / "submission")
    assert path == tmp_path / "submission" / "attention.py" and path.read_text() == mistake.source
