"""FlashAttention-1's order: the outer loop over key tiles, the inner over query tiles, each query tile's output
kept normalised (O = (l * exp(m - m_new) * O + exp(s - m_new) @ V) / l_new) in Python lists."""

import math

import torch


def flash_attention(q, k, v, causal=False, block_size=64):
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and T_q != T_k:
        raise ValueError("causal attention needs T_q == T_k")
    scale = 1 / math.sqrt(q.shape[-1])
    starts = list(range(0, T_q, block_size))
    O = [torch.zeros_like(q[..., i:i + block_size, :1].expand(*q.shape[:-2], -1, v.shape[-1])) for i in starts]
    L = [torch.zeros_like(q[..., i:i + block_size, 0]) for i in starts]
    M = [torch.full_like(q[..., i:i + block_size, 0], -math.inf) for i in starts]
    for j in range(0, T_k, block_size):
        Kj, Vj = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
        for n, i in enumerate(starts):
            if causal and j > i + block_size - 1:
                continue
            S = q[..., i:i + block_size, :] @ Kj.transpose(-1, -2) * scale
            if causal:
                r = torch.arange(i, i + S.shape[-2], device=q.device)
                c = torch.arange(j, j + S.shape[-1], device=q.device)
                S = S.masked_fill(c[None, :] > r[:, None], -math.inf)
            m_tile = S.max(-1).values
            P = torch.exp(S - m_tile[..., None])
            l_tile = P.sum(-1)
            m_new = torch.maximum(M[n], m_tile)
            l_new = torch.exp(M[n] - m_new) * L[n] + torch.exp(m_tile - m_new) * l_tile
            O[n] = ((L[n] * torch.exp(M[n] - m_new))[..., None] * O[n]
                    + torch.exp(m_tile - m_new)[..., None] * (P @ Vj)) / l_new[..., None]
            M[n], L[n] = m_new, l_new
    return torch.cat(O, dim=-2), torch.cat([m + torch.log(l) for m, l in zip(M, L, strict=True)], dim=-1)
