"""Causal masking: each position may look at itself and the past, never at the future.

The simplest way to mix context is to replace position t by the average of positions 0..t.
Three ways to write it, each faster than the last (x is (B, T, C)):

    # 1. a loop: one mean per position (careful: write into a new tensor, not into x, or
    #    later rows average rows you have already averaged)
    out[:, t] = x[:, :t+1].mean(dim=1)
    # 2. the same mean as a weighted sum: row t of a (T, T) weight matrix holds 1/(t+1)
    #    in columns 0..t and 0 after them; out[:, t] = weights[t] @ x, so out = weights @ x
    # 3. no loop at all: start from scores (here all 0, i.e. equal), block the upper
    #    triangle with -inf, and let softmax turn each row into those same weights
    weights = torch.zeros(T, T).masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
    out = weights.softmax(dim=-1) @ x   # (T, T) @ (B, T, C) -> (B, T, C)

Version 3 is what attention does, except that its scores come from queries and keys instead
of being all equal. A causal mask can be written two ways that give the same softmax:

- a keep mask of ones and zeros (1 = may attend, on and below the diagonal), used as
  `scores.masked_fill(keep == 0, float("-inf"))`;
- an additive mask of 0 (may attend) and -inf (blocked), used as `scores + mask`.

Either way a blocked score becomes -inf, exp(-inf) = 0, so its weight is exactly 0 and the
kept weights of each row still sum to 1.
"""

import torch


def causal_average(x: torch.Tensor) -> torch.Tensor:
    """Replace each position by the mean of itself and every earlier position.

    Args:
        x: (B, T, C).

    Returns:
        (B, T, C), same dtype and device as x, with out[:, t] = x[:, :t+1].mean(dim=1).
        Vectorised: no Python loop over T (the grader counts the operations you run).
    """
    # TODO: build the (T, T) averaging weights (version 2 or 3 above) in x's dtype and on
    #   x's device, and return weights @ x.
    raise NotImplementedError("masking: causal_average, the mean over positions 0..t without a loop")


def weight_mask_and_normalization(weight: torch.Tensor) -> torch.Tensor:
    """Block the scores above the diagonal, then softmax every row.

    Args:
        weight: (..., T, T) scores, any number of leading dims.

    Returns:
        (..., T, T): row i spreads over columns 0..i (entries after i are exactly 0) and sums to 1.
    """
    # TODO: set the entries above the diagonal to -inf (a tril keep mask, compared with 0),
    #   then softmax over the last dim.
    raise NotImplementedError("masking: weight_mask_and_normalization, mask the upper triangle then softmax")


def create_look_ahead_mask(seq_len: int) -> torch.Tensor:
    """Keep mask: nonzero where column <= row (the past and the present), 0 above the diagonal.

    Returns:
        (1, 1, seq_len, seq_len), the two leading 1s broadcast over batch and heads.
    """
    # TODO: the lower triangle (with its diagonal) of a ones matrix, viewed as (1, 1, L, L).
    raise NotImplementedError("masking: create_look_ahead_mask, a (1, 1, L, L) lower-triangular keep mask")


def causal_mask(seq_len: int) -> torch.Tensor:
    """Additive mask: 0 on and below the diagonal, -inf above it, to be added to the scores.

    Returns:
        (1, 1, seq_len, seq_len), float.
    """
    # TODO: a (1, 1, L, L) tensor full of -inf, keeping only its strict upper triangle
    #   (torch.triu with diagonal=1 turns the rest into 0).
    raise NotImplementedError("masking: causal_mask, a (1, 1, L, L) additive mask of 0 and -inf")
