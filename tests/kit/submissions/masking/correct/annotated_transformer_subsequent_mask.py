"""The annotated Transformer's subsequent_mask (its local variable named like the function: a variable, not
recursion) behind causal_average and all three masks, with -1e9 for the blocked scores."""

import torch


def subsequent_mask(size):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return subsequent_mask == 0


def causal_average(x):
    T = x.size(1)
    weights = subsequent_mask(T)[0].to(device=x.device, dtype=x.dtype)  # (T, T): 1 on and below the diagonal
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ x  # (T, T) @ (B, T, C) -> (B, T, C)


def weight_mask_and_normalization(weight):
    mask = subsequent_mask(weight.size(-1))[0].to(weight.device)
    return weight.masked_fill(mask == 0, -1e9).softmax(dim=-1)


def create_look_ahead_mask(seq_len):
    return subsequent_mask(seq_len).unsqueeze(0)  # (1, 1, L, L), True where kept


def causal_mask(seq_len):
    blocked = subsequent_mask(seq_len).unsqueeze(0) == 0
    return torch.zeros(1, 1, seq_len, seq_len).masked_fill(blocked, float("-inf"))
