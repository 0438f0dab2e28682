"""The contract taken literally: nn.Embedding's own N(0, 1) init; greedy picks the argmax of log_softmax."""

import math

import torch
import torch.nn.functional as F
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

    def encode(self, src, src_mask=None):
        return self.encoder(self.pos(math.sqrt(self.d_model) * self.src_embed(src)), src_mask)

    def decode(self, memory, tgt, src_mask=None, tgt_mask=None):
        return self.decoder(self.pos(math.sqrt(self.d_model) * self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        memory = self.encode(src, src_mask)
        out = self.decode(memory, tgt, src_mask, tgt_mask)
        return self.generator(out)


def greedy_decode(model, src, max_len, start_symbol):
    memory = model.encode(src).detach()
    ys = torch.ones(src.shape[0], 1, dtype=torch.long, device=src.device).fill_(start_symbol)
    while ys.shape[1] < max_len:
        out = model.decode(memory, ys)
        prob = F.log_softmax(model.generator(out[:, -1]), dim=-1)
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
    return ys.detach()
