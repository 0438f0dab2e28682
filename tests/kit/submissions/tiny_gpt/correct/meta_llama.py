"""Meta's llama as its model.py writes it, float32 inside whatever the input (x.float() in RMSNorm, RoPE's complex
product and the softmax): its RMSNorm, complex-number RoPE from precompute_freqs_cis, repeat_kv, a SwiGLU whose hidden
width is 2/3 of 4 * dim rounded up to multiple_of, the cache (B, T_seen, n_kv_heads, head_dim); with torchtitan's
initialisation for training from scratch: N(0, 1) embeddings, truncated N(0, 0.02) projections, the output
projections' std shrunk with depth, the head's truncated N(0, dim ** -0.5)."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])  # (1, T, 1, head_dim // 2)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def init_weights(self, init_std):
        for linear in (self.wq, self.wk, self.wv):
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=0.02)
        nn.init.trunc_normal_(self.wo.weight, mean=0.0, std=init_std)

    def forward(self, x, start_pos, freqs_cis, mask, cache):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        if cache is not None:
            xk = torch.cat((cache[0], xk), dim=1)
            xv = torch.cat((cache[1], xv), dim=1)
        cache = (xk, xv)
        keys = repeat_kv(xk, self.n_rep).transpose(1, 2)  # (bs, n_heads, cache_len + seqlen, head_dim)
        values = repeat_kv(xv, self.n_rep).transpose(1, 2)
        xq = xq.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output), cache


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, multiple_of=256):
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def init_weights(self, init_std):
        nn.init.trunc_normal_(self.w1.weight, mean=0.0, std=0.02)
        for linear in (self.w2, self.w3):
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=init_std)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id, dim, n_heads, n_kv_heads, n_layers):
        super().__init__()
        self.attention = Attention(dim, n_heads, n_kv_heads)
        self.feed_forward = FeedForward(dim, 4 * dim)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)
        self.weight_init_std = 0.02 / (2 * (layer_id + 1)) ** 0.5  # torchtitan's depth_init

    def init_weights(self):
        for norm in (self.attention_norm, self.ffn_norm):
            nn.init.ones_(norm.weight)
        self.attention.init_weights(self.weight_init_std)
        self.feed_forward.init_weights(self.weight_init_std)

    def forward(self, x, start_pos, freqs_cis, mask, cache):
        h, cache = self.attention(self.attention_norm(x), start_pos, freqs_cis, mask, cache)
        h = x + h
        return h + self.feed_forward(self.ffn_norm(h)), cache


class TinyGPT(nn.Module):
    def __init__(self, vocab, dim=64, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=128):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.tok_embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(TransformerBlock(i, dim, n_heads, n_kv_heads, n_layers) for i in range(n_layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim // n_heads, max_seq_len), persistent=False)
        self.init_weights()

    def init_weights(self):
        nn.init.normal_(self.tok_embed.weight)
        for layer in self.layers:
            layer.init_weights()
        nn.init.ones_(self.norm.weight)
        final_out_std = self.tok_embed.weight.size(1) ** -0.5
        nn.init.trunc_normal_(self.head.weight, mean=0.0, std=final_out_std, a=-3 * final_out_std,
                              b=3 * final_out_std)

    def forward(self, idx, cache=None):
        _bsz, seqlen = idx.shape
        start_pos = 0 if cache is None else cache[0][0].size(1)
        if start_pos + seqlen > self.max_seq_len:
            raise ValueError("longer than max_seq_len")
        h = self.tok_embed(idx)
        freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"), device=idx.device)
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos), device=idx.device), mask]).type_as(h)
        new_cache = []
        for i, layer in enumerate(self.layers):
            h, layer_cache = layer(h, start_pos, freqs_cis, mask, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.head(self.norm(h)), new_cache


@torch.no_grad()
def generate(model, idx, max_new_tokens):
    logits, cache = model(idx)
    for _ in range(max_new_tokens):
        next_token = torch.argmax(logits[:, -1], dim=-1, keepdim=True)
        idx = torch.cat((idx, next_token), dim=1)
        logits, cache = model(next_token, cache)
    return idx
