"""The Transformer encoder: a stack of identical layers that turn the source into `memory`.

Each layer does two things, each wrapped in a pre-norm ResidualConnection (sublayers.py):

    x = x + dropout(self_attn(norm1(x)))     every position looks at every source position
    x = x + dropout(feed_forward(norm2(x)))  then each position is transformed on its own

Self-attention here is NOT causal: the whole source sentence is known in advance, so every
word may look at the words before and after it. The only mask is a keep mask for padding:
sentences of a batch are padded to one length, and `mask` (B, 1, 1, T), True for real tokens,
stops every position from attending to the padding. It broadcasts over the heads and queries.

The stack is n_layers layers, each with its OWN weights: build n separate EncoderLayer objects
in an nn.ModuleList. ([layer] * n repeats one object, so all "layers" would share the same
weights.) Each layer has its own two residual connections, each with its own LayerNorm.

Final LayerNorm: in a pre-norm layer the residual path x is never normalised, so its scale
grows layer after layer. One more nn.LayerNorm after the last layer hands the decoder (and the
next stage) normalised features.
"""

import torch
from torch import nn

from .config import ModelArgs  # noqa: F401  (the sizes for MultiHeadAttention)
from .multi_head_attention import MultiHeadAttention  # noqa: F401  (the self-attention)
from .sublayers import FeedForward, ResidualConnection  # noqa: F401


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each in a pre-norm residual: (B, T, d_model) -> (B, T, d_model).

    Args:
        d_model: width of each token.
        n_heads: number of attention heads (d_model must be divisible by it).
        d_ff: hidden width of the feed-forward.
        dropout: dropout probability, for the attention, the feed-forward and the residuals.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        self_attn: MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout)),
            is_causal=False
        feed_forward: FeedForward(d_model, d_ff, dropout)
        residual1, residual2: ResidualConnection(d_model, dropout), one per sublayer
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: create self.self_attn, self.feed_forward, self.residual1 and self.residual2.
        raise NotImplementedError("encoder: EncoderLayer, create self_attn, feed_forward, residual1, residual2")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Args:
            x: (B, T, d_model).
            mask: optional keep mask broadcastable to (B, n_heads, T, T), e.g. padding (B, 1, 1, T).

        Returns:
            (B, T, d_model).
        """
        # TODO: x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask))   (q, k, v all from y)
        #   then return self.residual2(x, self.feed_forward).
        raise NotImplementedError("encoder: EncoderLayer.forward, self-attention then feed-forward, each residual")


class Encoder(nn.Module):
    """n_layers EncoderLayers, then a final LayerNorm: (B, T, d_model) -> (B, T, d_model).

    Args:
        n_layers: number of layers, each with its own weights.
        d_model, n_heads, d_ff, dropout: as for EncoderLayer.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        layers: nn.ModuleList of n_layers distinct EncoderLayer objects
        norm: nn.LayerNorm(d_model), applied after the last layer
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: create self.layers (a new EncoderLayer for each of the n_layers) and self.norm.
        raise NotImplementedError("encoder: Encoder, create layers (nn.ModuleList) and norm")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Args: x (B, T, d_model); mask as for EncoderLayer, passed to every layer.

        Returns:
            (B, T, d_model), the encoder's output (the decoder's `memory`).
        """
        # TODO: run x through every layer in order, each with the mask, then apply self.norm.
        raise NotImplementedError("encoder: Encoder.forward, every layer with the mask, then the final norm")
