"""Realistic mistakes in multi_head_attention.py kept out of the catalogue: they must lose points and get no known
name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="scaled_twice",
        why="Divides the scores by sqrt(head_dim) twice, which equals dividing by sqrt(dim) when head_dim = sqrt(dim).",
        edits=(("/ math.sqrt(self.head_dim)", "/ math.sqrt(self.head_dim) / math.sqrt(self.head_dim)"),),
    ),
    EditedVersion(
        name="keys_through_the_value_layer",
        why="Projects the keys with wv instead of wk, a copy-paste slip.",
        edits=(("xk = self.wk(k)", "xk = self.wv(k)"),),
    ),
    EditedVersion(
        name="heads_interleaved_when_merged",
        why="Merges the heads feature by feature (head_dim outer, heads inner) instead of side by side.",
        edits=(("out = (p_attn @ xv).transpose(1, 2).contiguous().view(B, T_q, dim)",
                "out = (p_attn @ xv).permute(0, 2, 3, 1).reshape(B, T_q, dim)"),),
    ),
)
