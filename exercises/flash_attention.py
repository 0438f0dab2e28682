"""FlashAttention's forward: exact attention, computed a tile at a time with an online softmax.

    out = softmax(q k^T / sqrt(d)) v        lse = log sum_j exp(q k_j / sqrt(d))

Plain attention builds the whole (T_q, T_k) matrix of scores before its softmax: at T = 16384 that
is a gigabyte in float32, for one head of one sequence. FlashAttention never holds it. It walks over
the keys `block_size` at a time (and over the queries `block_size` at a time), and keeps per query
only three things: the largest score seen so far `m`, the sum `l` of exp(score - m) so far, and the
unnormalised output `acc`, the sum of exp(score - m) * v so far.

Why is that exact, and not an approximation? softmax is shift-invariant: exp(s_j - m) / sum exp(s - m)
is the same for every m, so any running maximum will do, as long as every term was taken with the
same one. When a new tile brings a larger maximum m_new, the terms summed so far were taken with the
old m: multiply them by alpha = exp(m - m_new) and they are exactly as if m_new had been used from
the start. So, tile after tile:

    m_new = max(m, rowmax(s))                  s: this tile's scaled scores, (..., Bq, Bk)
    p     = exp(s - m_new)
    l     = alpha * l + rowsum(p)              alpha = exp(m - m_new): both running values rescaled
    acc   = alpha * acc + p @ v_tile

and, after the last tile, out = acc / l (divide once, at the end) and lse = m + log(l), the
log-sum-exp of the row: log sum exp(s) = m + log sum exp(s - m). The lse is what FlashAttention's
backward pass keeps instead of the weights: with it, any weight exp(s_ij - lse_i) can be recomputed
a tile at a time.

A causal mask is applied per tile too: key j is kept for query i when j <= i, with i and j the
**global** positions (the tile's offset plus the index inside it). Tiles entirely above the diagonal
can be skipped.
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    block_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax(q k^T / sqrt(d)) v, and each query's log-sum-exp, over tiles of `block_size`.

    `...` is any number of leading dims (batch, heads, ...), the same for all inputs. It must never
    hold a (T_q, T_k) tensor (not the scores, not a mask, not in float16 either): beyond its inputs
    and outputs it holds a few tiles of about T x block_size. The grader runs it at T = 12288 under
    a memory limit that a single T x T float32 matrix (576 MiB), or even a T x T bool mask, exceeds.
    Gradients come from autograd through the tiles: keep the computation in torch, out of place.

    Args:
        q: (..., T_q, d), the queries.
        k: (..., T_k, d), the keys.
        v: (..., T_k, d), the values.
        causal: if True, query i sees key j only when j <= i (global positions); it needs
            T_q == T_k: raise ValueError otherwise.
        block_size: the number of keys (and queries) one tile holds; any block_size >= 1 gives the
            same result, up to rounding, and T need not be a multiple of it.

    Returns:
        out: (..., T_q, d), softmax(q k^T / sqrt(d)) v, in the inputs' dtype.
        lse: (..., T_q), the natural-log log-sum-exp of each query's scaled scores q k^T / sqrt(d)
            (the max plus the log of the sum, not one of them alone; ln, not log2).
    """
    # TODO: in the dtype and on the device of the inputs,
    #   1. raise ValueError for causal with T_q != T_k; scale = 1 / sqrt(d);
    #   2. for each tile of keys (and, FlashAttention-2's way, inside a loop over tiles of queries):
    #      s = scaled scores of the tile (-inf where the causal mask blocks, with global indices),
    #      m_new = max(m, rowmax(s)), alpha = exp(m - m_new), p = exp(s - m_new),
    #      l = alpha * l + rowsum(p), acc = alpha * acc + p @ v_tile, m = m_new;
    #   3. return acc / l and m + log(l).
    raise NotImplementedError("flash_attention: the online-softmax forward over tiles, returning (out, lse)")
