"""Two known mistakes in one exercise, in-process and cheap: both are named where the evidence shows both, and
fixing either one changes what the student is told.

A pair is two catalogued mistakes of one exercise made in one file (`variants.combined`: both edits applied to the
reference); a pair whose edits touch the same lines, or that does not compose into code that imports, is not
independent: it is counted and skipped. The pair's own facets stand for the submission (its scenario is run once,
as `diagnose` would run it on the pair's file), and what a student is told is the mistakes named and the scenario's
facets it fails (each facet is a call the suite's tests make). Fixing one mistake of a pair leaves the other alone,
which the catalogue test names (test_diagnosis.py). Where the mistake left hides every trace of the one fixed
(it raises at every call that shows it, say), nothing can show the fix: such pairs are counted, not failed; nor can
anything name both mistakes of such a pair (flash attention holding the whole score matrix runs none of the tiled
code another mistake is in), so it is left out of the share of pairs both named, and listed.
"""

from __future__ import annotations

import itertools

import pytest

from grader.judge import diagnosis, variants
from grader.judge.diagnosis.compare import ObservedMistake

EXERCISES = sorted(diagnosis.SCENARIOS)
GOAL = 0.9  # of the independent pairs, the share in which both mistakes are named


pytestmark = pytest.mark.usefixtures("one_thread")


def _seen(known: diagnosis.KnownFacets, facets: diagnosis.Facets) -> tuple[frozenset[str], frozenset[str]]:
    """The mistakes named, and the facets the submission fails (away from the reference by more than correct code
    can be)."""
    named = frozenset(m.name for m in diagnosis.match(known, dict(facets)))
    failing = frozenset(name for name, value in facets.items()
                        if diagnosis.distance(value, known.reference[name])
                        > (diagnosis.SEPARATION + 1.0) * known.tolerances[name])
    return named, failing


def _masked(known: diagnosis.KnownFacets, fixed: ObservedMistake, left: ObservedMistake,
            pair: ObservedMistake) -> bool:
    """Whether the mistake left hides every trace of the one fixed: wherever the fixed one differs from the
    reference, the pair is the one left alone (it raises there, say, or has no dropout for the fixed one's
    probability to act in). No grader can show such a fix; the test counts them."""
    return all(diagnosis.distance(pair.facets[name], left.facets[name])
               <= (1.0 if name in left.differs else diagnosis.SEPARATION + 1.0) * known.tolerances[name]
               for name in fixed.differs)


def test_two_mistakes_are_both_named_and_fixing_either_shows():
    both_named, independent, skipped, unseen, masked, hidden, lines = 0, 0, 0, [], [], [], []
    for exercise in EXERCISES:
        known = diagnosis.known_facets(exercise)
        assert known is not None
        alone = {m.mistake.name: m for m in known.mistakes}
        named_here = pairs_here = 0
        for a, b in itertools.combinations(sorted(alone), 2):
            pair = diagnosis.pair(exercise, "cpu", a, b)
            if pair is None:
                skipped += 1
                continue
            seen = _seen(known, pair.facets)
            if _masked(known, alone[a], alone[b], pair) or _masked(known, alone[b], alone[a], pair):
                hidden.append(f"{exercise}: {a} and {b}")  # one leaves no trace: nothing could name both
            else:
                pairs_here += 1
                named_here += seen[0] == {a, b}
            for fixed, left in ((a, b), (b, a)):
                if _seen(known, alone[left].facets) != seen:
                    continue
                if _masked(known, alone[fixed], alone[left], pair):
                    masked.append(f"{exercise}: {fixed} under {left}")
                else:
                    unseen.append(f"{exercise}: {a} and {b}, {fixed} fixed")
        both_named += named_here
        independent += pairs_here
        lines.append(f"{exercise}: {named_here}/{pairs_here}")
    rate = both_named / independent
    print(f"both named in {both_named}/{independent} independent pairs ({rate:.0%}), {skipped} pairs not "
          f"independent; " + ", ".join(lines) + f"; {len(hidden)} pairs where one mistake hides the other, not "
          f"counted: " + ", ".join(hidden) + f"; {len(masked)} fixes masked by the other mistake: " + ", ".join(masked))
    assert rate >= GOAL, f"both mistakes named in {rate:.0%} of the pairs ({', '.join(lines)}), the goal is {GOAL:.0%}"
    assert not unseen, "fixing one mistake of a pair changes nothing the student is told:\n" + "\n".join(unseen)


def test_pairs_are_built_from_both_edits_and_overlapping_ones_are_not_independent():
    by_name = {m.name: m for m in variants.mistakes("head_attention")}
    both = variants.combined(by_name["tril_plain_attribute"], by_name["scale_by_n_embd"])
    assert "self.tril = torch.tril(" in both.source and "* C**-0.5" in both.source
    with pytest.raises(variants.NotIndependent):
        variants.combined(by_name["tril_plain_attribute"], by_name["tril_parameter"])


def test_the_issues_pair_names_the_buffer_and_the_scale():
    """Issue 46: tril not a buffer and scores scaled by C**-0.5 got no diagnosis for the scale."""
    module = diagnosis.combination("head_attention", "scale_by_n_embd", "tril_plain_attribute").module
    got = diagnosis.diagnose("head_attention", diagnosis.Library({"head_attention": module}))
    assert {m.name for m in got} == {"scale_by_n_embd", "tril_plain_attribute"}
