"""Correct variants of positional_encoding.py that are one idea away from solutions/positional_encoding.py."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="float64_then_cast",
        why="Computes the table in float64 and casts it to float32 before registering it.",
        edits=(
            ("torch.arange(max_len, dtype=torch.float32)", "torch.arange(max_len, dtype=torch.float64)"),
            ("torch.arange(0, d_model, 2, dtype=torch.float32)", "torch.arange(0, d_model, 2, dtype=torch.float64)"),
            ("pe = torch.zeros(max_len, d_model)", "pe = torch.zeros(max_len, d_model, dtype=torch.float64)"),
            ('self.register_buffer("pe", pe.unsqueeze(0))', 'self.register_buffer("pe", pe.float().unsqueeze(0))'),
        ),
    ),
)
