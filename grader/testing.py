"""`testing` is the one module graded suites import: checks whose failures read as feedback, and their vocabulary.

Feedback is written in English and shown in the student's language (grader.lang): a message is
`tr("template with {fields}", fields=...)`, a hint closes it with `hint_suffix(tr("..."))`, text kept in a
constant is marked `N_("...")`, and the helpers' `name=`, `what=` and `hint=` take plain English, which they
translate themselves (grader.extract finds all of these for the catalog).

The checks live in grader/judge/ (`checks`, `claims`, `expect`, `structure`, `measures`, `dropout`, `rates`,
`branches`, and `stacks`, what the encoder's and the decoder's suites share);
the failures a call into the submission raises in `grader.host.failures`; the capstone's task (shared
with the worker) in `grader.inside.shared.capstone`, the second's (TinyGPT's) in `grader.inside.shared.induction`.
"""

from typing import Any

import torch

from grader.host.failures import NotImplementedYet, SubmissionFailure
from grader.inside.shared import capstone, induction
from grader.inside.shared.capstone import FIRST_DATA_TOKEN, copy_batch, derangement, shifted
from grader.inside.shared.induction import induction_batch, predictable
from grader.judge.branches import branch_weights, expect_branch_dropped
from grader.judge.checks import EPS32, assert_close, float64, golden, manual_seed, random_keep_mask, tolerance
from grader.judge.claims import gradient_hint, only_match
from grader.judge.dropout import (
    expect_weights_and_output_dropped,
    explained_by_weight_dropout,
    unexplained_by_weight_dropout,
    uniform_causal,
)
from grader.judge.expect import expect_tensor, expect_tuple, hint_on_crash, hint_suffix
from grader.judge.measures import Gradients, OpCount, backward, count_ops, fresh_worker
from grader.judge.rates import expect_dropout
from grader.judge.stacks import expect_parameters, padding_mask, parameter_problems, randomise_norms, silenced
from grader.judge.structure import ModuleInfo, describe, expect_structure, load_parameters
from grader.lang import N_, tr

__all__ = [
    "EPS32",
    "FIRST_DATA_TOKEN",
    "N_",
    "Gradients",
    "ModuleInfo",
    "NotImplementedYet",
    "OpCount",
    "SubmissionFailure",
    "assert_close",
    "backward",
    "branch_weights",
    "cached_logits",
    "copy_batch",
    "count_ops",
    "derangement",
    "describe",
    "expect_branch_dropped",
    "expect_dropout",
    "expect_parameters",
    "expect_structure",
    "expect_tensor",
    "expect_tuple",
    "expect_weights_and_output_dropped",
    "explained_by_weight_dropout",
    "float64",
    "fresh_worker",
    "golden",
    "gradient_hint",
    "greedy_copy",
    "hint_on_crash",
    "hint_suffix",
    "induction_batch",
    "load_parameters",
    "manual_seed",
    "only_match",
    "padding_mask",
    "parameter_problems",
    "predictable",
    "random_keep_mask",
    "randomise_norms",
    "shifted",
    "silenced",
    "tolerance",
    "tr",
    "unexplained_by_weight_dropout",
    "uniform_causal",
]


def greedy_copy(model: Any, src: torch.Tensor) -> torch.Tensor:
    """`grader.inside.shared.capstone.greedy_copy`, its failures in the student's language."""
    try:
        return capstone.greedy_copy(model, src)
    except capstone.Misshapen as failure:
        raise AssertionError(tr(failure.template, **failure.fields)) from None


def cached_logits(model: Any, rows: torch.Tensor, prompt: int) -> torch.Tensor:
    """`grader.inside.shared.induction.cached_logits`, its failures in the student's language."""
    try:
        return induction.cached_logits(model, rows, prompt)
    except induction.Misshapen as failure:
        raise AssertionError(tr(failure.template, **failure.fields)) from None
