"""What a hint may claim as a cause (grader/judge/claims.py), in-process: the one cause an output matches, the
pattern of a gradient's error, and every claiming message of the suites checked against the catalogue."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from test_catalogue_grading import CLAIMS

from grader.judge.claims import FROZEN, gradient_hint, only_match, zero_lines

REPO = Path(__file__).resolve().parents[2]
CATALOGS = ("tests/public/locale/zh/LC_MESSAGES/public.po", "tests/hidden/locale/zh/LC_MESSAGES/hidden.po",
            "grader/locale/zh/LC_MESSAGES/grader.po")
# How a claim about a cause reads: "It matches the output when ...", "that is post-norm", "your X are scaled ...",
# "every query's row sums to the same ...".
CLAIMING = re.compile(r"matches the output|looks like|equals what|that is [\w-]+-norm|frozen (?:row|column)|"
                      r"sum to 1 over|your \w+ (?:is|are) (?:not|scaled)|are the softmax over|sums to the same")
SCATTERED = "look for a .detach(), torch.no_grad() or an in-place edit."


def test_a_cause_is_named_only_where_the_output_matches_it_alone():
    x = torch.randn(4, 8)
    assert only_match(x, {"a": x.clone(), "b": x + 1}, atol=1e-6) == "a"
    assert only_match(x, {"a": x.clone(), "b": x * (1 + 1e-9)}, atol=1e-6) is None  # the probe cannot tell them apart
    assert only_match(x, {"a": x + 1, "b": x[:2]}, atol=1e-6) is None


def test_whole_rows_at_zero_name_a_frozen_row():
    want = torch.randn(11, 32)
    got = want.clone()
    got[0] = 0  # padding_idx=0: 32 of 352 values
    assert zero_lines(got, want, atol=1e-6) == (0, [0])
    hint = gradient_hint(got, want, atol=1e-6, name="src_embed.weight", scattered=SCATTERED)
    assert "frozen row" in hint and "padding_idx" in hint and ".detach()" not in hint, hint


def test_whole_columns_at_zero_name_a_frozen_column():
    want = torch.randn(16, 8)
    got = want.clone()
    got[:, [2, 5]] = 0
    assert zero_lines(got, want, atol=1e-6) == (1, [2, 5])
    assert "frozen column" in gradient_hint(got, want, atol=1e-6, name="w", scattered=SCATTERED)


def test_scattered_errors_name_detach_no_grad_and_in_place_edits():
    want = torch.randn(11, 32)
    cases = {
        "scattered": want + 0.1 * torch.randn_like(want),
        "a row at zero and an error elsewhere": torch.cat([torch.zeros(1, 32), want[1:] * 1.5]),
        "a row off but not zero": torch.cat([want[:1] * 2, want[1:]]),
        "the whole tensor at zero": torch.zeros_like(want),
        "half of the scale": want / 2,
    }
    for case, got in cases.items():
        assert zero_lines(got, want, atol=1e-6) is None, case
        assert gradient_hint(got, want, atol=1e-6, name="w", scattered=SCATTERED) == SCATTERED, case
    assert zero_lines(torch.zeros(5), torch.ones(5), atol=1e-6) is None  # a bias has no rows to speak of


def test_every_claiming_message_is_checked_against_the_catalogue():
    """Each message of the suites and the grader that claims a cause from what the output matches is in CLAIMS,
    which test_catalogue_grading reads against every catalogued and held-out mistake's grading."""
    msgids = ["".join(re.findall(r'"(.*)"', found)) for path in CATALOGS
              for found in re.findall(r'^msgid ((?:".*"\n)+)msgstr', (REPO / path).read_text(encoding="utf-8"),
                                      flags=re.MULTILINE)]
    claiming = [msgid for msgid in msgids if CLAIMING.search(msgid)]
    unchecked = [msgid for msgid in claiming if not any(claim in msgid for claim in CLAIMS)]
    assert claiming and not unchecked, unchecked
    assert all(any(claim in msgid for msgid in claiming) for claim in CLAIMS), "a claim of CLAIMS no message makes"
    assert len(FROZEN) == 2
