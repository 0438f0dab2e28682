"""F.layer_norm with the norm's own parameters, an extra nn.ReLU module, and x added last (out + x)."""

from torch import nn
from torch.nn import functional as F


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = nn.ReLU()  # a module without parameters: the state_dict is unchanged

    def forward(self, x):
        return self.w2(self.dropout(self.activation(self.w1(x))))


class ResidualConnection(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        normed = F.layer_norm(x, self.norm.normalized_shape, self.norm.weight, self.norm.bias, self.norm.eps)
        out = sublayer(normed)
        out = self.dropout(out)
        return out + x
