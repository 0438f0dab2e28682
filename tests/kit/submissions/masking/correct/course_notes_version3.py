"""The course notes' version 3 (tril, -inf where 0, softmax, matmul) and mask functions; float32 softmax cast back."""

import torch
import torch.nn.functional as F


def causal_average(x):
    B, T, C = x.shape
    weight = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    weight = weight.masked_fill(weight == 0, float("-inf"))
    weight = F.softmax(weight, dim=1)
    return weight @ x


def weight_mask_and_normalization(weight):
    tril = torch.tril(torch.ones_like(weight))
    weight = weight.masked_fill(tril == 0, float("-inf"))
    return F.softmax(weight.float(), dim=-1).type_as(weight)


def create_look_ahead_mask(seq_len):
    mask = torch.tril(torch.ones(seq_len, seq_len))
    return mask.unsqueeze(0).unsqueeze(0)


def causal_mask(seq_len):
    mask = torch.full((1, 1, seq_len, seq_len), float("-inf"))
    return torch.triu(mask, diagonal=1)
