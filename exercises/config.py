"""Model hyper-parameters shared by the exercises (provided complete, not graded)."""

from dataclasses import dataclass


@dataclass
class ModelArgs:
    """Sizes of a Transformer block: model width, heads, dropout and the longest sequence."""

    dim: int = 512  # model width d_model; split evenly across the heads
    n_heads: int = 8
    dropout: float = 0.0
    max_seq_len: int = 512  # size of the precomputed causal mask

    @property
    def n_embd(self) -> int:
        """The model width under its nanoGPT name; the same number as `dim`."""
        return self.dim
