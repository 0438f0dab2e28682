"""Multi-head attention through F.scaled_dot_product_attention (nanoGPT and llama2.c on torch 2): dropout_p reads
attn_dropout.p in training, is_causal when there is no extra mask, else one additive float attn_mask."""

import torch
import torch.nn.functional as F
from torch import nn

from .masking import causal_mask


class MultiHeadAttention(nn.Module):
    def __init__(self, args, is_causal=False):
        super().__init__()
        assert args.dim % args.n_heads == 0
        self.n_heads = args.n_heads
        self.head_dim = args.dim // args.n_heads
        self.is_causal = is_causal
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)  # kept for its p: the kernel drops the weights itself
        self.resid_dropout = nn.Dropout(args.dropout)
        if is_causal:
            self.register_buffer("mask", causal_mask(args.max_seq_len))

    def forward(self, q, k, v, mask=None):
        bsz, seqlen, _ = q.shape
        kvlen = k.shape[1]
        xq = self.wq(q).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(k).view(bsz, kvlen, self.n_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(v).view(bsz, kvlen, self.n_heads, self.head_dim).transpose(1, 2)
        dropout_p = self.attn_dropout.p if self.training else 0.0
        if mask is None:
            output = F.scaled_dot_product_attention(xq, xk, xv, dropout_p=dropout_p, is_causal=self.is_causal)
        else:
            bias = torch.zeros(seqlen, kvlen, dtype=xq.dtype, device=xq.device)
            if self.is_causal:
                bias = bias + self.mask[0, 0, :seqlen, :kvlen].to(xq.dtype)
            bias = bias.masked_fill(mask == 0, float("-inf"))
            output = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=bias, dropout_p=dropout_p)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.resid_dropout(self.wo(output))
