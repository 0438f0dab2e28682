"""Both dropouts as F.dropout with p read from the module (`self.dropout.p`), not by calling it.

The two building blocks around attention: the position-wise feed-forward and the pre-norm residual connection."""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class FeedForward(nn.Module):
    """Position-wise feed-forward network: (..., d_model) -> (..., d_model), the same MLP at every position.

    Attributes: `w1` (nn.Linear(d_model, d_ff)), `w2` (nn.Linear(d_ff, d_model)), `dropout`.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(torch.relu(self.w1(x)), p=self.dropout.p, training=self.training)  # (..., d_ff)
        return self.w2(h)  # (..., d_model)


class ResidualConnection(nn.Module):
    """Pre-norm residual connection: x + dropout(sublayer(norm(x))), (..., d_model) -> (..., d_model).

    Attributes: `norm` (nn.LayerNorm(d_model)), `dropout`.
    """

    def __init__(self, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        out = sublayer(self.norm(x))
        return x + F.dropout(out, p=self.dropout.p, training=self.training)  # the identity path is untouched
