"""Rotary position embedding (RoPE): rotate queries and keys so that attention scores see only distances.

The sinusoidal encoding of positional_encoding.py is *added* to the embeddings once, at the bottom
of the network. RoPE (RoFormer, 2021; used by llama, Mistral, Qwen, ...) instead *turns* every
query and key, in every layer, by an angle that grows with its position, just before the scores.

Cut a head's head_dim features into head_dim / 2 pairs: pair i is features (2i, 2i+1), a point
in the plane. At position p, pair i is rotated by the angle

    angle[p, i] = p * base^(-2i / head_dim)      (base = 10000)

    out[2i]   = x[2i] * cos(angle) - x[2i+1] * sin(angle)
    out[2i+1] = x[2i] * sin(angle) + x[2i+1] * cos(angle)

Pair 0 turns one radian per position; later pairs turn slower and slower (the same frequencies
as the sinusoidal encoding), so fast pairs tell near positions apart and slow ones far ones.

Why the scores become relative. A rotation keeps lengths, and the dot product of two vectors
rotated by angles a and b is the dot product of the originals with one of them rotated by b - a.
Pair by pair, the score of a query at position m and a key at position n is

    q_rot(m) . k_rot(n) = sum_i  rotate(q_i, m * f_i) . rotate(k_i, n * f_i)
                        = sum_i  q_i . rotate(k_i, (n - m) * f_i)

which depends on m - n only: shift both positions by the same amount and every score stays the
same. Nothing is added to the values, and position 0 is the identity (cos 0 = 1, sin 0 = 0).

The pairing is a convention, and this kit uses RoFormer's and Meta's llama's: *adjacent* features
(2i, 2i+1), "interleaved". Hugging Face's llama uses `rotate_half`, which pairs feature i with
feature i + head_dim / 2; its scores are relative too, but it rotates different numbers, so a model
trained with one convention breaks with the other (their checkpoints permute wq and wk to convert).
Meta's code writes the same rotation with complex numbers: pair i as x[2i] + j x[2i+1], multiplied
by e^(j angle) = cos(angle) + j sin(angle) (torch.view_as_complex, torch.polar); that is the
formula above, and welcome here.

The angles never change, so compute cos and sin once, as float32 tables (max_seq_len, head_dim // 2),
and store them in RotaryEmbedding as buffers: a buffer follows the module through .to(device) and
is saved in state_dict, a plain attribute does neither. Because the tables are float32, a float64
input is rotated at float32 accuracy; the output keeps the input's dtype.

Shapes: x (..., T, head_dim), any leading dims: (B, n_heads, T, head_dim) in attention. positions
is an optional LongTensor (T,) of absolute positions (default 0..T-1), what a KV cache needs: the
tokens of a decoding step sit after those already seen.
"""

import torch
from torch import nn


def rope_tables(head_dim: int, max_seq_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin of every angle RoPE turns by.

    Args:
        head_dim: features per head (even).
        max_seq_len: number of positions in the tables.
        base: the base of the frequencies, 10000 by default.

    Returns:
        (cos, sin), each (max_seq_len, head_dim // 2), float32, with
        angle[p, i] = p * base^(-2i / head_dim) for p = 0 .. max_seq_len-1, i = 0 .. head_dim/2 - 1.
    """
    # TODO: the frequencies base^(-2i / head_dim) for 2i = 0, 2, ..., head_dim - 2 (torch.arange(0, head_dim, 2)),
    #   the positions 0..max_seq_len-1, their outer product (the angles), then its cos and its sin, in float32.
    raise NotImplementedError("rope: compute the angles p * base^(-2i/head_dim) and return their cos and sin")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate each pair (2i, 2i+1) of x's features by the angle of its token's position.

    Args:
        x: (..., T, head_dim), any leading dims, float32 or float64.
        cos, sin: the tables of rope_tables, (max_seq_len, head_dim // 2).
        positions: optional LongTensor (T,) of absolute positions; default 0..T-1.

    Returns:
        (..., T, head_dim), x's dtype: out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i] sin + x[2i+1] cos.
    """
    # TODO: take the rows of cos and sin for the positions (T, head_dim/2); split x into its even and odd
    #   features (x[..., 0::2], x[..., 1::2]); rotate; put the pairs back in place (interleaved, not halves).
    raise NotImplementedError("rope: rotate the pairs (x[2i], x[2i+1]) by the angles of their positions")


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys by their positions, with tables computed once.

    Args:
        head_dim: features per head (even).
        max_seq_len: the longest sequence (the tables' rows).
        base: the base of the frequencies, 10000 by default.

    Attributes (the grader looks for these names):
        cos, sin: buffers (max_seq_len, head_dim // 2), float32, from rope_tables.
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0) -> None:
        super().__init__()
        # TODO: cos, sin = rope_tables(...); register both with self.register_buffer.
        raise NotImplementedError("rope: register the cos and sin tables as buffers")

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys alike.

        Args:
            q: (..., T, head_dim) queries; k: (..., T, head_dim) keys (their leading dims may differ).
            positions: optional LongTensor (T,) of absolute positions; default 0..T-1.

        Returns:
            (q, k) rotated, each in its own shape and dtype.
        """
        # TODO: apply_rope to q and to k with this module's tables and the same positions.
        raise NotImplementedError("rope: return apply_rope(q, ...), apply_rope(k, ...)")
