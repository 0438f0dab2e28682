"""Dropout before the relu: relu(dropout(h)) equals dropout(relu(h)), the zeros and the 1/(1-p) commute."""

from torch import nn


class FeedForward(nn.Module):
    """relu(dropout(z)) == dropout(relu(z)) exactly: the mask scale is positive."""
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.w2(self.act(self.dropout(self.w1(x))))


class ResidualConnection(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        residual = x
        x = self.norm(x)
        x = sublayer(x)
        x = self.dropout(x)
        return residual + x
