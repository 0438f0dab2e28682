"""Realistic mistakes in tiny_gpt.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="generate_drops_the_new_cache",
        why="generate keeps the prompt's cache: each new token is fed with it, at the position after the prompt, and "
            "the cache the call returns is thrown away.",
        edits=(("logits, cache = model(next_token, cache)", "logits, _ = model(next_token, cache)"),),
    ),
    EditedVersion(
        name="keys_not_rotated",
        why="Rotates the queries only: the keys keep no position, so a score depends on the query's position alone.",
        edits=(("q, k = self.rope(q, k, positions)", "q, _ = self.rope(q, k, positions)"),),
    ),
)
