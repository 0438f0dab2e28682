"""Sinusoidal positional encoding: tell attention where each token sits in the sequence.

Attention on its own ignores order: shuffle the tokens and every output is shuffled the same
way. So before the first layer each position p gets a fixed vector added to its embedding:

    pe[p, 2i]   = sin(p / 10000^(2i / d_model))
    pe[p, 2i+1] = cos(p / 10000^(2i / d_model))      for i = 0 .. d_model/2 - 1

Each pair of columns (2i, 2i+1) is a point turning on a circle; column pair 0 turns by one
radian per position, and the last pairs turn slower and slower (wavelengths from 2*pi up
to 10000 * 2*pi). Why sin and cos?
- bounded: every value is in [-1, 1] whatever the position, so it never swamps the embedding;
- distinct: no two positions (up to far beyond any max_len) get the same vector;
- relative: pe[p + k] is a fixed linear map (a rotation of each pair) of pe[p], the same for
  every p, so "k tokens back" is something a layer can learn once for all positions.

The numbers never change, so compute the table once in __init__ and store it as a buffer with
self.register_buffer("pe", pe), not as an nn.Parameter: a buffer follows the module through
.to(device) / .double(), is saved in state_dict, and the optimiser never trains it.
A common way to write 1 / 10000^(2i / d_model) is torch.exp(-(2i) * math.log(10000.0) / d_model).
"""

import math  # noqa: F401  (math.log, for the frequencies)

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """Add the sinusoidal encoding of positions 0..T-1 to a batch of embeddings, then dropout.

    Args:
        d_model: width of the embeddings (even).
        max_len: number of positions in the table; inputs may be at most this long.
        dropout: probability of nn.Dropout, applied to the sum.

    Attributes (the grader looks for these names):
        pe: buffer (1, max_len, d_model), float32, with pe[0, p] the encoding of position p
            (sin in the even columns, cos in the odd ones); the leading 1 broadcasts over B.
        dropout: nn.Dropout(dropout).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: position (max_len, 1) and the frequencies 1 / 10000^(2i / d_model), shape
        #   (d_model / 2,); fill a (max_len, d_model) zeros table: sin into columns 0::2, cos
        #   into 1::2; register it as the buffer "pe" with shape (1, max_len, d_model);
        #   create self.dropout.
        raise NotImplementedError("positional_encoding: build the sin/cos table and register it as the buffer pe")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the encodings of the first T positions.

        Args:
            x: (B, T, d_model) embeddings, T <= max_len.

        Returns:
            (B, T, d_model): dropout(x + pe[:, :T]); in eval mode simply x + pe[:, :T].
        """
        # TODO: add self.pe[:, :T] (T = x.size(1)) to x, then apply self.dropout to the sum.
        raise NotImplementedError("positional_encoding: return dropout(x + pe[:, :T])")
