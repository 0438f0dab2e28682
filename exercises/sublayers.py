"""The two pieces every Transformer layer wraps around attention: a feed-forward and a residual.

Position-wise feed-forward. Attention mixes information *between* positions; the feed-forward
then works on each position on its own, the same small MLP for every token:

    FFN(x) = w2(dropout(relu(w1(x))))      w1: d_model -> d_ff (wider, usually 4x), w2: d_ff -> d_model

nn.Linear acts on the last dim, so (B, T, d_model) goes in and comes out with no reshaping.

Residual connection, pre-norm. Each sublayer (attention or feed-forward) is wrapped as

    out = x + dropout(sublayer(norm(x)))

- The residual `x + ...` is an identity path: the output is x plus a correction, and the gradient
  reaches x unchanged through the `+`, however many layers are stacked. Deep stacks train
  because of it; with a sublayer that returns 0 the block returns exactly x.
- Pre-norm: the LayerNorm is applied to the sublayer's *input*, so every sublayer sees
  features with mean 0 and variance 1, while x itself is never normalised on its way through.
  The original paper used post-norm, norm(x + sublayer(x)); the course notes mix up the two
  names, but their code, and this kit, is pre-norm. (A pre-norm stack leaves its output
  un-normalised, so the encoder and decoder end with one more LayerNorm.)
- Dropout acts on the sublayer's output, before it is added to x, and only while training.
"""

from collections.abc import Callable

import torch
from torch import nn


class FeedForward(nn.Module):
    """The same two-layer MLP at every position: (..., d_model) -> (..., d_model).

    Args:
        d_model: width of each token.
        d_ff: width of the hidden layer.
        dropout: probability of zeroing a hidden activation while training.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        w1: nn.Linear(d_model, d_ff), with bias
        w2: nn.Linear(d_ff, d_model), with bias
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: create self.w1, self.w2 and self.dropout.
        raise NotImplementedError("sublayers: FeedForward, create w1, w2 and dropout")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x (..., d_model). Returns: (..., d_model), w2(dropout(relu(w1(x))))."""
        # TODO: w1 (..., d_ff), relu, dropout, then w2 (..., d_model).
        raise NotImplementedError("sublayers: FeedForward.forward, w2(dropout(relu(w1(x))))")


class ResidualConnection(nn.Module):
    """Wrap a sublayer in a pre-norm residual: x + dropout(sublayer(norm(x))), (..., d_model) -> same.

    Args:
        d_model: width of each token, the size of the LayerNorm.
        dropout: probability of zeroing an entry of the sublayer's output while training.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        norm: nn.LayerNorm(d_model)
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: create self.norm and self.dropout.
        raise NotImplementedError("sublayers: ResidualConnection, create norm and dropout")

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Args:
            x: (..., d_model).
            sublayer: any callable (..., d_model) -> (..., d_model): a module, a function or a
                lambda; call it as sublayer(y).

        Returns:
            (..., d_model), x + dropout(sublayer(norm(x))).
        """
        # TODO: normalise x, apply the sublayer, dropout, then add x itself (not norm(x)).
        raise NotImplementedError("sublayers: ResidualConnection.forward, x + dropout(sublayer(norm(x)))")
