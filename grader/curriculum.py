"""`curriculum` names the exercises, their files, their points and the order students meet them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    id: str
    points: float
    names: tuple[str, ...]  # what its file must define (the contract's names)
    needs: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        return f"{self.id}.py"


EXERCISES: tuple[Exercise, ...] = (
    Exercise("attention", 10, ("attention",)),
    Exercise("masking", 10,
             ("causal_average", "weight_mask_and_normalization", "create_look_ahead_mask", "causal_mask")),
    Exercise("head_attention", 10, ("HeadAttention",)),
    Exercise("multi_head_attention", 15, ("MultiHeadAttention",), needs=("attention", "masking")),
    Exercise("positional_encoding", 10, ("PositionalEncoding",)),
    Exercise("sublayers", 10, ("FeedForward", "ResidualConnection")),
    Exercise("encoder", 10, ("EncoderLayer", "Encoder"), needs=("multi_head_attention", "sublayers")),
    Exercise("decoder", 10, ("DecoderLayer", "Decoder"), needs=("multi_head_attention", "sublayers")),
    Exercise("transformer", 15, ("Transformer", "greedy_decode"), needs=("positional_encoding", "encoder", "decoder")),
)

BY_ID: dict[str, Exercise] = {exercise.id: exercise for exercise in EXERCISES}

# Files a submission may provide; everything else in it is ignored.
SUBMISSION_FILES: tuple[str, ...] = tuple(exercise.file for exercise in EXERCISES)


def prerequisites(exercise_id: str) -> tuple[str, ...]:
    """Every exercise `exercise_id` builds on, directly or not, in curriculum order."""
    found: set[str] = set()
    stack = list(BY_ID[exercise_id].needs)
    while stack:
        need = stack.pop()
        if need not in found:
            found.add(need)
            stack.extend(BY_ID[need].needs)
    return tuple(exercise.id for exercise in EXERCISES if exercise.id in found)


def exercise_of_test_file(filename: str) -> str | None:
    """`test_multi_head_attention.py` -> `multi_head_attention`; None for files of no exercise."""
    stem = filename.removesuffix(".py")
    if not stem.startswith("test_"):
        return None
    exercise_id = stem.removeprefix("test_")
    return exercise_id if exercise_id in BY_ID else None
