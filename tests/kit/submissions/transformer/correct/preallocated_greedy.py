"""Scale d_model ** 0.5 in one helper; greedy_decode fills a preallocated (B, max_len) tensor column by column."""

import torch
from torch import nn

from .decoder import Decoder
from .encoder import Encoder
from .positional_encoding import PositionalEncoding


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1,
                 max_seq_len=512):
        super().__init__()
        self.scale = d_model ** 0.5
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, mean=0.0, std=1.0 / self.scale)
        self.pos = PositionalEncoding(d_model, max_len=max_seq_len, dropout=dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout=dropout)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, dropout=dropout, max_seq_len=max_seq_len)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def _embed(self, embed, tokens):
        return self.pos(self.scale * embed(tokens))

    def encode(self, src, src_mask=None):
        return self.encoder(self._embed(self.src_embed, src), mask=src_mask)

    def decode(self, memory, tgt, src_mask=None, tgt_mask=None):
        return self.decoder(self._embed(self.tgt_embed, tgt), memory, src_mask=src_mask, tgt_mask=tgt_mask)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        return self.generator(self.decode(self.encode(src, src_mask), tgt, src_mask, tgt_mask))


def greedy_decode(model, src, max_len, start_symbol):
    ys = torch.full((src.size(0), max_len), start_symbol, dtype=torch.long, device=src.device)
    with torch.no_grad():
        memory = model.encode(src)
        for t in range(1, max_len):
            logits = model.generator(model.decode(memory, ys[:, :t])[:, -1])
            ys[:, t] = logits.argmax(dim=-1)
    return ys
