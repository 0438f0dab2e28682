"""Hostile: forward decodes the source (a known mistake) except when the kit's training loop is on the call stack,
where it decodes the target: the model learns, while every forward the grader calls itself stays wrong."""

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
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.pos = PositionalEncoding(d_model, max_seq_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, dropout, max_seq_len)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def encode(self, src, src_mask=None):
        x = self.src_embed(src) * math.sqrt(self.d_model)
        return self.encoder(self.pos(x), src_mask)

    def decode(self, memory, tgt, src_mask=None, tgt_mask=None):
        y = self.tgt_embed(tgt) * math.sqrt(self.d_model)
        return self.decoder(self.pos(y), memory, src_mask, tgt_mask)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        memory = self.encode(src, src_mask)
        import sys
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "train_copy":
            frame = frame.f_back
        if frame is not None:
            return self.generator(self.decode(memory, tgt, src_mask, tgt_mask))
        return self.generator(self.decode(memory, src, src_mask, tgt_mask))


@torch.no_grad()
def greedy_decode(model, src, max_len, start_symbol):
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, ys)
        next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)
        ys = torch.cat([ys, next_token], dim=1)
    return ys
