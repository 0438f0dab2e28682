"""FlashAttention's forward: exact attention computed tile by tile with an online softmax."""

import math

import torch


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    block_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d)) v and each query's log-sum-exp, never holding a (T_q, T_k) tensor.

    Args:
        q: (..., T_q, d).
        k: (..., T_k, d).
        v: (..., T_k, d).
        causal: key j is kept for query i when j <= i; needs T_q == T_k.
        block_size: how many queries, and how many keys, one tile holds.

    Returns:
        out (..., T_q, d) and lse (..., T_q), the natural log-sum-exp of each query's scaled scores.
    """
    T_q, T_k = q.size(-2), k.size(-2)
    if causal and T_q != T_k:
        raise ValueError(f"causal attention needs as many queries as keys, got T_q={T_q} and T_k={T_k}")
    scale = 1.0 / math.sqrt(q.size(-1))
    outs, lses = [], []
    for i in range(0, T_q, block_size):  # one block of queries at a time (FlashAttention-2's outer loop)
        q_blk = q[..., i:i + block_size, :] * scale  # (..., Bq, d)
        rows = torch.arange(i, i + q_blk.size(-2), device=q.device)  # the block's global query positions
        m = torch.full(q_blk.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)  # (..., Bq) running max
        l = torch.zeros_like(m)  # (..., Bq) running sum of exp(score - m)
        acc = torch.zeros(*q_blk.shape[:-1], v.size(-1), dtype=q.dtype, device=q.device)  # (..., Bq, d) unnormalised
        last = min(T_k, i + block_size) if causal else T_k  # causal: keys after the block's last query are all blocked
        for j in range(0, last, block_size):
            k_blk, v_blk = k[..., j:j + block_size, :], v[..., j:j + block_size, :]  # (..., Bk, d)
            s = q_blk @ k_blk.transpose(-2, -1)  # (..., Bq, Bk) this tile's scaled scores
            if causal:
                cols = torch.arange(j, j + k_blk.size(-2), device=q.device)  # global key positions
                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))  # (..., Bq); finite: the first tile keeps key 0
            alpha = torch.exp(m - m_new)  # rescales what was summed under the old max (0 at the first tile)
            p = torch.exp(s - m_new[..., None])  # (..., Bq, Bk)
            l = alpha * l + p.sum(dim=-1)
            acc = alpha[..., None] * acc + p @ v_blk
            m = m_new
        outs.append(acc / l[..., None])  # normalise once, at the end
        lses.append(m + torch.log(l))  # log sum exp(s) = m + log sum exp(s - m)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)  # (..., T_q, d), (..., T_q)
