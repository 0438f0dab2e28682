"""Xavier-uniform init for every weight matrix (the annotated Transformer's make_model); one shared _embed helper."""

import math

import torch
from torch import nn

from .decoder import Decoder
from .encoder import Encoder
from .positional_encoding import PositionalEncoding


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1,
                 max_seq_len=512):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_seq_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, dropout, max_seq_len)
        self.generator = nn.Linear(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask=None):
        x = self.src_embed(src) * math.sqrt(self.d_model)  # (B, S, d_model)
        return self.encoder(self.pos(x), src_mask)

    def decode(self, memory, tgt, src_mask=None, tgt_mask=None):
        y = self.tgt_embed(tgt) * math.sqrt(self.d_model)  # (B, T, d_model)
        return self.decoder(self.pos(y), memory, src_mask, tgt_mask)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        return self.generator(self.decode(self.encode(src, src_mask), tgt, src_mask, tgt_mask))


@torch.no_grad()
def greedy_decode(model, src, max_len, start_symbol):
    memory = model.encode(src)
    ys = src.new_full((src.size(0), 1), start_symbol)
    for _ in range(max_len - 1):
        logits = model.generator(model.decode(memory, ys))  # (B, t, tgt_vocab)
        ys = torch.cat([ys, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ys
