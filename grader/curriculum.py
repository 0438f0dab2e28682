"""`curriculum` names the tracks, their exercises, files, points and the order students meet them.

The first track (`transformer`, nine exercises from the course notes) is the 100-point course: whatever does not
name a track means it. The second (`modern`: rotary positions, a KV cache, grouped-query, flash and sliding-window
attention) is graded apart, with its own points, only where a user asks for it (`--track modern`, or one of its
exercises by name).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.kit import kit_root
from grader.lang import N_


@dataclass(frozen=True)
class Exercise:
    id: str
    points: float
    names: tuple[str, ...]  # what its file must define (the contract's names)
    needs: tuple[str, ...] = ()  # exercises it builds on, in any track

    @property
    def file(self) -> str:
        return f"{self.id}.py"


@dataclass(frozen=True)
class Track:
    id: str
    title: str  # English; shown through tr()
    exercises: tuple[Exercise, ...]

    @property
    def points(self) -> float:
        return float(sum(exercise.points for exercise in self.exercises))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(exercise.id for exercise in self.exercises)


TRANSFORMER = Track("transformer", N_("The Transformer, from the course notes"), (
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
))

# The second track's exercises join it as each is built (the contract's order: rope, kv_cache,
# grouped_query_attention, flash_attention, sliding_window, tiny_gpt).
MODERN = Track("modern", N_("Attention as it is built today"), (
    Exercise("rope", 15, ("rope_tables", "apply_rope", "RotaryEmbedding")),
    Exercise("kv_cache", 15, ("CachedSelfAttention",), needs=("rope",)),
    Exercise("grouped_query_attention", 15, ("GroupedQueryAttention", "kv_cache_bytes")),
    Exercise("flash_attention", 20, ("flash_attention",)),
    Exercise("sliding_window", 15, ("sliding_window_mask", "combine_masks", "masked_attention", "RollingKVCache")),
    Exercise("tiny_gpt", 20, ("TinyGPT", "generate"), needs=("rope", "kv_cache", "grouped_query_attention")),
))

TRACKS: tuple[Track, ...] = (TRANSFORMER, MODERN)
FIRST = TRANSFORMER  # the course: what a command means when it names no track

# Every exercise of every track, in curriculum order (a report lists its exercises in this order).
EXERCISES: tuple[Exercise, ...] = tuple(exercise for track in TRACKS for exercise in track.exercises)

BY_ID: dict[str, Exercise] = {exercise.id: exercise for exercise in EXERCISES}
TRACK_OF: dict[str, Track] = {exercise.id: track for track in TRACKS for exercise in track.exercises}
TRACK_BY_ID: dict[str, Track] = {track.id: track for track in TRACKS}

RELEASE_TRACK = Path("grader/locale/release-track")  # in a release: the track it ships, one word; the kit has none

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


def with_prerequisites(track: Track) -> tuple[Exercise, ...]:
    """The exercises of `track` and every exercise they build on, in curriculum order: what a release of it ships."""
    wanted = {need for exercise in track.exercises for need in (exercise.id, *prerequisites(exercise.id))}
    return tuple(exercise for exercise in EXERCISES if exercise.id in wanted)


def default_track(root: Path | None = None) -> Track:
    """The track a command means when it names none: a release's own (`grader release --track`), else the first."""
    try:
        return TRACK_BY_ID[(root or kit_root()).joinpath(RELEASE_TRACK).read_text(encoding="utf-8").strip()]
    except (OSError, UnicodeDecodeError, KeyError):
        return FIRST
