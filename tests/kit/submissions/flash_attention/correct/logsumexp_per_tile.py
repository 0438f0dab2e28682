"""Online softmax kept as a running log-sum-exp: torch.logsumexp per key tile, merged with torch.logaddexp."""

import math

import torch


def flash_attention(q, k, v, causal=False, block_size=64):
    T_q, T_k = q.size(-2), k.size(-2)
    if causal and T_q != T_k:
        raise ValueError("causal attention needs T_q == T_k")
    q = q / math.sqrt(q.size(-1))
    lse = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype, device=q.device)
    out = torch.zeros(*q.shape[:-1], v.size(-1), dtype=q.dtype, device=q.device)  # normalised at every step
    rows = torch.arange(T_q, device=q.device)
    for j in range(0, T_k, block_size):
        s = q @ k[..., j:j + block_size, :].mT
        if causal:
            cols = torch.arange(j, min(j + block_size, T_k), device=q.device)
            s = s.masked_fill(cols > rows[:, None], -math.inf)
        new = torch.logaddexp(lse, torch.logsumexp(s, dim=-1))
        out = out * torch.exp(lse - new)[..., None] + torch.exp(s - new[..., None]) @ v[..., j:j + block_size, :]
        lse = new
    return out, lse
