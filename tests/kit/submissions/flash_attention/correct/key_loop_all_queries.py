"""FlashAttention over key tiles only, every query at once, the running max and sum kept as (..., T_q, 1) tensors."""

import torch


def flash_attention(q, k, v, causal=False, block_size=64):
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and T_q != T_k:
        raise ValueError("causal attention needs T_q == T_k")
    scale = q.shape[-1] ** -0.5
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)  # (..., T_q, 1)
    l = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    qi = torch.arange(T_q, device=q.device)[:, None]
    for j in range(0, T_k, block_size):
        kj, vj = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
        s = (q @ kj.transpose(-2, -1)) * scale  # (..., T_q, Bk)
        if causal:
            kj_idx = torch.arange(j, j + kj.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(kj_idx > qi, float("-inf"))
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p = torch.exp(s - m_new)
        corr = torch.exp(m - m_new)
        l = l * corr + p.sum(dim=-1, keepdim=True)
        o = o * corr + p @ vj
        m = m_new
    return o / l, (m + torch.log(l)).squeeze(-1)
