"""Sliding-window attention through F.scaled_dot_product_attention, with the rows that keep no key opened up before it
and zeroed after it; the cache a deque of single positions with maxlen=window."""

from collections import deque

import torch
import torch.nn.functional as F


def sliding_window_mask(seq_len, window):
    pos = torch.arange(seq_len)
    diff = pos.view(-1, 1) - pos.view(1, -1)  # i - j
    return (diff >= 0) & (diff < window)


def combine_masks(keep, key_padding):
    B, T_k = key_padding.shape
    return keep.to(key_padding.device).view(1, 1, *keep.shape) & (key_padding != 0).view(B, 1, 1, T_k)


def masked_attention(q, k, v, keep):
    keep = keep != 0
    empty = ~keep.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep | empty)
    return out.masked_fill(empty, 0.0)


class RollingKVCache:
    def __init__(self, window):
        self.keys = deque(maxlen=window)
        self.values = deque(maxlen=window)

    def update(self, k, v):
        for t in range(k.shape[2]):
            self.keys.append(k[:, :, t])
            self.values.append(v[:, :, t])
        return torch.stack(list(self.keys), dim=2), torch.stack(list(self.values), dim=2)
