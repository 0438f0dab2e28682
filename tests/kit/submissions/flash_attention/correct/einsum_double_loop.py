"""FlashAttention-2's double loop written with torch.einsum, results written into preallocated out and lse."""

import math

import torch


def flash_attention(q, k, v, causal=False, block_size=64):
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    if causal and T_q != T_k:
        raise ValueError("causal attention needs T_q == T_k")
    out = torch.empty(*lead, T_q, v.shape[-1], dtype=q.dtype, device=q.device)
    lse = torch.empty(*lead, T_q, dtype=q.dtype, device=q.device)
    for qs in range(0, T_q, block_size):
        qe = min(qs + block_size, T_q)
        qb = q[..., qs:qe, :]
        m = torch.full((*lead, qe - qs), -math.inf, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        o = torch.zeros(*lead, qe - qs, v.shape[-1], dtype=q.dtype, device=q.device)
        for ks in range(0, T_k, block_size):
            if causal and ks > qe - 1:
                break  # every key of this tile and after is in the future of every query of the block
            ke = min(ks + block_size, T_k)
            s = torch.einsum("...qd,...kd->...qk", qb, k[..., ks:ke, :]) / math.sqrt(d)
            if causal:
                qi = torch.arange(qs, qe, device=q.device).unsqueeze(-1)
                kj = torch.arange(ks, ke, device=q.device).unsqueeze(0)
                s = torch.where(kj <= qi, s, torch.tensor(-math.inf, dtype=s.dtype, device=s.device))
            m_new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - m_new.unsqueeze(-1))
            r = torch.exp(m - m_new)
            l = r * l + p.sum(-1)
            o = r.unsqueeze(-1) * o + torch.einsum("...qk,...kd->...qd", p, v[..., ks:ke, :])
            m = m_new
        out[..., qs:qe, :] = o / l.unsqueeze(-1)
        lse[..., qs:qe] = m + l.log()
    return out, lse
