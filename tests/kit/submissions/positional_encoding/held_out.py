"""Realistic mistakes in positional_encoding.py kept out of the catalogue: they must lose points and get no known
name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="positions_divided_by_the_frequencies",
        why="Divides the positions by 1/10000^(2i/d) instead of multiplying, so the wavelengths shrink.",
        edits=(("pe[:, 0::2] = torch.sin(position * div_term)", "pe[:, 0::2] = torch.sin(position / div_term)"),
               ("pe[:, 1::2] = torch.cos(position * div_term)", "pe[:, 1::2] = torch.cos(position / div_term)")),
    ),
    EditedVersion(
        name="sin_in_every_column",
        why="Fills the odd columns with sin as well, a copy-paste slip.",
        edits=(("pe[:, 1::2] = torch.cos(position * div_term)", "pe[:, 1::2] = torch.sin(position * div_term)"),),
    ),
)
