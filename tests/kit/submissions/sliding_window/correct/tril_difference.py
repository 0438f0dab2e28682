"""Sliding-window attention with the window as a difference of two triangles (tril minus a lower tril), the padding
through unsqueeze, and -inf fills with a where() for the empty rows."""

import math

import torch


def sliding_window_mask(seq_len, window):
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)
    return torch.tril(ones) & ~torch.tril(ones, diagonal=-window)


def combine_masks(keep, key_padding):
    return keep.unsqueeze(0).unsqueeze(0).to(key_padding.device) & key_padding.unsqueeze(1).unsqueeze(2).bool()


def masked_attention(q, k, v, keep):
    d = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    keep = keep.bool()
    has_key = keep.any(-1, keepdim=True)
    safe = keep | ~has_key  # a row with no key attends everywhere, then its output is zeroed
    scores = scores.masked_fill(~safe, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return torch.where(has_key, out, torch.zeros_like(out))


class RollingKVCache:
    def __init__(self, window):
        self.window = window
        self.cache = None

    def update(self, k, v):
        if self.cache is not None:
            k = torch.cat((self.cache[0], k), dim=2)
            v = torch.cat((self.cache[1], v), dim=2)
        self.cache = (k[:, :, max(0, k.shape[2] - self.window):], v[:, :, max(0, v.shape[2] - self.window):])
        return self.cache
