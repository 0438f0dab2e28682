"""Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V."""

import math
from collections.abc import Callable

import torch


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend from each query to all keys and return the mixed values and the weights.

    Args:
        query: (..., L_q, d_k).
        key: (..., L_k, d_k).
        value: (..., L_k, d_v).
        dropout: optional module or callable applied to the attention weights.
        mask: optional keep mask broadcastable to (..., L_q, L_k); 0 / False is blocked.

    Returns:
        output (..., L_q, d_v) and p_attn (..., L_q, L_k), the weights after dropout.
    """
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., L_q, L_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))  # blocked keys get weight 0
    p_attn = scores.softmax(dim=-1)  # (..., L_q, L_k), each row sums to 1
    if dropout is not None:
        p_attn = dropout(p_attn)
    return p_attn @ value, p_attn  # (..., L_q, d_v), (..., L_q, L_k)
