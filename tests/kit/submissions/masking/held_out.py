"""Realistic mistakes in masking.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="average_normalised_by_columns",
        why="Normalises the causal average's weights by their column sums instead of their row sums.",
        edits=(("weights.sum(dim=1, keepdim=True)", "weights.sum(dim=0, keepdim=True)"),),
    ),
    EditedVersion(
        name="weights_keep_the_future",
        why="Keeps the entries above the diagonal (triu) instead of those on and below it.",
        edits=(("keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).tril()",
                "keep = torch.ones(T, T, dtype=torch.bool, device=weight.device).triu()"),),
    ),
)
