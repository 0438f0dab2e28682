"""The Transformer decoder: generates the target one token at a time, reading the encoder's memory.

Each decoder layer has THREE sublayers, each in a pre-norm ResidualConnection (sublayers.py):

1. Masked (causal) self-attention over the target generated so far. At inference the decoder
   produces token t+1 from tokens 0..t; in training the whole target is fed in at once (all
   positions in parallel, "teacher forcing"), so position t must be stopped from peeking at
   tokens t+1.. that it is supposed to predict. `self_attn` is a MultiHeadAttention built with
   is_causal=True: it adds the look-ahead mask itself. `tgt_mask` is an optional EXTRA keep
   mask on top of it, e.g. padding of the target (B, 1, 1, T_tgt).
2. Cross-attention (encoder-decoder attention): the queries come from the decoder's x, the
   keys and values from `memory`, the encoder's output. This is where the target reads the
   source: each target position picks the source positions it needs. Not causal: the source
   is known entirely. `src_mask` (the encoder's padding mask, e.g. (B, 1, 1, T_src)) keeps it
   off the source padding. T_tgt and T_src may differ.
3. The position-wise feed-forward.

The stack is n_layers distinct DecoderLayers (nn.ModuleList), every layer reading the same
memory, then a final nn.LayerNorm: pre-norm layers leave the residual path un-normalised.
"""

import torch
from torch import nn

from .config import ModelArgs  # noqa: F401  (the sizes for MultiHeadAttention)
from .multi_head_attention import MultiHeadAttention  # noqa: F401  (both attentions)
from .sublayers import FeedForward, ResidualConnection  # noqa: F401


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to memory, feed-forward; each in a pre-norm residual.

    Args:
        d_model, n_heads, d_ff, dropout: as for EncoderLayer.
        max_seq_len: the longest target; the size of the causal mask of self_attn.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        self_attn: MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout,
            max_seq_len=max_seq_len), is_causal=True)
        cross_attn: MultiHeadAttention(the same ModelArgs, is_causal=False)
        feed_forward: FeedForward(d_model, d_ff, dropout)
        residual1, residual2, residual3: ResidualConnection(d_model, dropout), one per sublayer
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512) -> None:
        super().__init__()
        # TODO: create self.self_attn, self.cross_attn, self.feed_forward and residual1..residual3.
        raise NotImplementedError("decoder: DecoderLayer, create self_attn, cross_attn, feed_forward, residual1..3")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Args:
            x: (B, T_tgt, d_model), the target so far (T_tgt <= max_seq_len).
            memory: (B, T_src, d_model), the encoder's output.
            src_mask: optional keep mask over the source, broadcastable to (B, n_heads, T_tgt, T_src).
            tgt_mask: optional extra keep mask over the target, broadcastable to (B, n_heads, T_tgt, T_tgt).

        Returns:
            (B, T_tgt, d_model).
        """
        # TODO:
        #   1. x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask))
        #   2. x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))
        #      (queries from the decoder, keys and values from memory)
        #   3. return self.residual3(x, self.feed_forward)
        raise NotImplementedError("decoder: DecoderLayer.forward, self-attention, cross-attention, feed-forward")


class Decoder(nn.Module):
    """n_layers DecoderLayers, then a final LayerNorm: (B, T_tgt, d_model) -> (B, T_tgt, d_model).

    Args:
        n_layers: number of layers, each with its own weights.
        d_model, n_heads, d_ff, dropout, max_seq_len: as for DecoderLayer.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        layers: nn.ModuleList of n_layers distinct DecoderLayer objects
        norm: nn.LayerNorm(d_model), applied after the last layer
    """

    def __init__(
        self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512
    ) -> None:
        super().__init__()
        # TODO: create self.layers (a new DecoderLayer for each of the n_layers) and self.norm.
        raise NotImplementedError("decoder: Decoder, create layers (nn.ModuleList) and norm")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Args and Returns: as for DecoderLayer; every layer reads the same memory and masks."""
        # TODO: run x through every layer in order (x, memory, src_mask, tgt_mask), then self.norm.
        raise NotImplementedError("decoder: Decoder.forward, every layer with memory and masks, then the final norm")
