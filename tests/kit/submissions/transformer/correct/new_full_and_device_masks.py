"""greedy_decode starts from src.new_full; every mask is made with device= the input's."""

import math

import torch
from torch import nn

from .decoder import Decoder
from .encoder import Encoder
from .positional_encoding import PositionalEncoding


class Transformer(nn.Module):
    """Source tokens (B, T_src) and target tokens (B, T_tgt) -> next-token logits (B, T_tgt, tgt_vocab).

    Attributes: `src_embed`, `tgt_embed` (nn.Embedding, outputs scaled by sqrt(d_model)); `pos`, one
    PositionalEncoding shared by both sides; `encoder`, `decoder`; `generator` = nn.Linear(d_model, tgt_vocab).
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 512,
        dropout: float = 0.1,
        max_seq_len: int = 512,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        for embed in (self.src_embed, self.tgt_embed):
            # std 1/sqrt(d_model): times sqrt(d_model) the embeddings have std 1, the scale of the encoding.
            nn.init.normal_(embed.weight, std=d_model**-0.5)
        self.pos = PositionalEncoding(d_model, max_len=max_seq_len, dropout=dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, dropout, max_seq_len)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, T_src) token ids -> memory (B, T_src, d_model)."""
        x = self.src_embed(src) * math.sqrt(self.d_model)  # (B, T_src, d_model), comparable to pe's amplitude 1
        return self.encoder(self.pos(x), src_mask)

    def decode(
        self,
        memory: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """memory (B, T_src, d_model), tgt (B, T_tgt) token ids -> (B, T_tgt, d_model)."""
        y = self.tgt_embed(tgt) * math.sqrt(self.d_model)  # (B, T_tgt, d_model)
        return self.decoder(self.pos(y), memory, src_mask, tgt_mask)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher forcing: the decoder reads all of tgt at once -> logits (B, T_tgt, tgt_vocab)."""
        memory = self.encode(src, src_mask)  # (B, T_src, d_model)
        return self.generator(self.decode(memory, tgt, src_mask, tgt_mask))  # (B, T_tgt, tgt_vocab)


@torch.no_grad()
def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, start_symbol: int) -> torch.Tensor:
    """Encode src once, then append the most likely next token max_len - 1 times -> (B, max_len), int64."""
    memory = model.encode(src)  # (B, T_src, d_model)
    ys = src.new_full((src.size(0), 1), start_symbol)  # (B, 1)
    for _ in range(max_len - 1):
        t = ys.size(1)
        keep = ~torch.triu(torch.ones(t, t, device=ys.device), diagonal=1).bool()
        out = model.decode(memory, ys, None, keep)  # (B, t, d_model)
        next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_token], dim=1)  # (B, t + 1)
    return ys
