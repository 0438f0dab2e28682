"""The whole Transformer: token ids in, next-token logits out, and greedy decoding on top.

    src (B, T_src) -> src_embed * sqrt(d_model) -> + pos -> encoder -> memory (B, T_src, d_model)
    tgt (B, T_tgt) -> tgt_embed * sqrt(d_model) -> + pos -> decoder(., memory) -> generator -> logits

Why multiply the embeddings by sqrt(d_model)? The positional encoding has values in [-1, 1].
Start the embedding tables small, std 1/sqrt(d_model) (nn.init.normal_), and times sqrt(d_model)
they have std 1, the same size as the positions: neither drowns the other. There is one
positional encoding, `pos`, used by both sides: position p means the same thing in both.

Training uses teacher forcing: the decoder reads the whole true target shifted right by one,
[start, y1, ..., y_{T-1}], and predicts [y1, ..., y_T] at all positions at once; its causal
self-attention keeps position t from peeking at the tokens after it.

Generating has no true target: encode the source ONCE, then decode step by step. Start with
ys = [start_symbol]; each step decodes ys, takes the logits of its LAST position and appends
their argmax (greedy: always the most likely token); stop when ys has max_len tokens.
"""

import math  # noqa: F401  (math.sqrt, for the embeddings' scale)

import torch
from torch import nn

from .decoder import Decoder  # noqa: F401
from .encoder import Encoder  # noqa: F401
from .positional_encoding import PositionalEncoding  # noqa: F401


class Transformer(nn.Module):
    """Encoder-decoder Transformer: src (B, T_src) and tgt (B, T_tgt) token ids -> logits (B, T_tgt, tgt_vocab).

    Args:
        src_vocab, tgt_vocab: number of source and target tokens.
        d_model, n_heads, n_layers, d_ff, dropout: as in Encoder and Decoder (both get n_layers).
        max_seq_len: longest sequence: the positional table and the decoder's causal mask.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        src_embed, tgt_embed: nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model)
        pos: PositionalEncoding(d_model, max_seq_len, dropout), shared by both sides
        encoder: Encoder(n_layers, d_model, n_heads, d_ff, dropout)
        decoder: Decoder(n_layers, d_model, n_heads, d_ff, dropout, max_seq_len)
        generator: nn.Linear(d_model, tgt_vocab), features -> logits (no softmax)
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 128, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int = 512, dropout: float = 0.1, max_seq_len: int = 512) -> None:
        super().__init__()
        # TODO: keep d_model; create the six modules above; initialise both embedding tables with
        #   nn.init.normal_(embed.weight, std=d_model ** -0.5).
        raise NotImplementedError("transformer: create src_embed, tgt_embed, pos, encoder, decoder, generator")

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, T_src) token ids -> memory (B, T_src, d_model); src_mask: optional keep mask (padding)."""
        # TODO: encoder(pos(src_embed(src) * sqrt(d_model)), src_mask).
        raise NotImplementedError("transformer: encode = encoder(pos(src_embed(src) * sqrt(d_model)))")

    def decode(self, memory: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
               tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """memory (B, T_src, d_model), tgt (B, T_tgt) token ids -> (B, T_tgt, d_model), before the generator."""
        # TODO: decoder(pos(tgt_embed(tgt) * sqrt(d_model)), memory, src_mask, tgt_mask).
        raise NotImplementedError("transformer: decode = decoder(pos(tgt_embed(tgt) * sqrt(d_model)), memory)")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing: src (B, T_src), tgt (B, T_tgt) -> logits (B, T_tgt, tgt_vocab).

        The logits are raw scores: no softmax (cross-entropy and argmax both take them as they are).
        """
        # TODO: memory = encode(src, src_mask); return generator(decode(memory, tgt, src_mask, tgt_mask)).
        raise NotImplementedError("transformer: forward = generator(decode(encode(src), tgt))")


def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, start_symbol: int) -> torch.Tensor:
    """Generate with the most likely token at every step.

    Args:
        model: a Transformer (call model.eval() first).
        src: (B, T_src) token ids.
        max_len: number of tokens to return, start symbol included.
        start_symbol: the token every output begins with.

    Returns:
        (B, max_len) int64 (torch.long) on src's device; column 0 is start_symbol.
    """
    # TODO: under torch.no_grad():
    #   1. memory = model.encode(src), once                                    (B, T_src, d_model)
    #   2. ys = torch.full((B, 1), start_symbol, dtype=torch.long, device=src.device)
    #   3. max_len - 1 times: out = model.decode(memory, ys)                    (B, t, d_model)
    #      next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)  (B, 1)
    #      ys = torch.cat([ys, next_token], dim=1)                              (B, t + 1)
    #   4. return ys                                                           (B, max_len)
    raise NotImplementedError("transformer: greedy_decode, encode once then append the argmax token max_len - 1 times")
