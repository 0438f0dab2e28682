"""Realistic mistakes in decoder.py kept out of the catalogue: they must lose points and get no known name."""

from grader.judge.variants import EditedVersion

VARIANTS = (
    EditedVersion(
        name="cross_attention_keys_from_its_own_stream",
        why="Cross-attention takes its keys from the decoder's own stream instead of the memory.",
        edits=(("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, y, memory, src_mask)"),),
    ),
    EditedVersion(
        name="cross_attention_masked_with_tgt_mask",
        why="Masks cross-attention with the target's mask instead of the source's.",
        edits=(("self.cross_attn(y, memory, memory, src_mask)", "self.cross_attn(y, memory, memory, tgt_mask)"),),
    ),
)
