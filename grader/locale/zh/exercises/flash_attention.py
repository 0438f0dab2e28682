"""FlashAttention 的前向计算：精确的注意力，借助在线 softmax 一次算一个分块。

    out = softmax(q k^T / sqrt(d)) v        lse = log sum_j exp(q k_j / sqrt(d))

普通的注意力在做 softmax 之前，要先建出整个 (T_q, T_k) 的分数矩阵：T = 16384 时，单单一个
序列的一个头，用 float32 就是 1 GB。FlashAttention 从不保存这个矩阵。它每次走过 `block_size`
个键（查询也是每次 `block_size` 个），每个查询只保留三样东西：到目前为止见过的最大分数 `m`，
到目前为止 exp(score - m) 的和 `l`，以及未归一化的输出 `acc`，即到目前为止 exp(score - m) * v
的和。

为什么这是精确的，而不是近似？softmax 对平移不变：对任何 m，exp(s_j - m) / sum exp(s - m)
都一样，所以随便用哪个一路更新的最大值都行，只要每一项都是用同一个 m 算的。当一个新的分块带来
更大的最大值 m_new 时，已经加起来的那些项是用旧的 m 算的：把它们乘以 alpha = exp(m - m_new)，
它们就和从一开始就用 m_new 算的完全一样。所以一个分块接一个分块：

    m_new = max(m, rowmax(s))                  s：这个分块缩放后的分数，(..., Bq, Bk)
    p     = exp(s - m_new)
    l     = alpha * l + rowsum(p)              alpha = exp(m - m_new)：两个一路累计的量都重新缩放
    acc   = alpha * acc + p @ v_tile

最后一个分块之后，out = acc / l（只在最后除一次），lse = m + log(l)，即这一行的
log-sum-exp：log sum exp(s) = m + log sum exp(s - m)。FlashAttention 为反向计算保存的就是 lse，
而不是权重：有了它，任何一个权重 exp(s_ij - lse_i) 都能一个分块一个分块地重新算出来。

因果掩码也按分块施加：当 j <= i 时，查询 i 保留键 j，这里的 i 和 j 是**全局**位置（分块的
偏移量加上分块内的下标）。完全位于对角线上方的分块可以跳过。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    block_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """按 `block_size` 大小的分块，精确计算 softmax(q k^T / sqrt(d)) v，以及每个查询的 log-sum-exp。

    `...` 表示任意多个前导维度（批量、头……），所有输入的前导维度都相同。它绝不能保存一个
    (T_q, T_k) 的张量（分数不行，掩码不行，用 float16 也不行）：除了输入和输出，它只保存几个
    大约 T x block_size 的分块。评分器在 T = 12288 时运行它，内存上限连一个 T x T 的 float32
    矩阵（576 MiB）都放不下，甚至一个 T x T 的 bool 掩码也放不下。
    梯度由 autograd 经过各个分块求出：计算要留在 torch 里，不要原地修改。

    参数：
        q: (..., T_q, d)，查询。
        k: (..., T_k, d)，键。
        v: (..., T_k, d)，值。
        causal: 为 True 时，只有 j <= i（全局位置）时查询 i 才能看键 j；这要求
            T_q == T_k：否则抛出 ValueError。
        block_size: 一个分块容纳的键（和查询）的个数；任何 block_size >= 1 给出的结果都相同
            （舍入误差除外），T 也不必是它的倍数。

    返回：
        out: (..., T_q, d)，softmax(q k^T / sqrt(d)) v，dtype 与输入相同。
        lse: (..., T_q)，每个查询缩放后的分数 q k^T / sqrt(d) 的自然对数 log-sum-exp
            （最大值加上和的对数，不是其中之一；用 ln，不是 log2）。
    """
    # TODO：使用输入的 dtype 和 device，
    #   1. causal 且 T_q != T_k 时抛出 ValueError；scale = 1 / sqrt(d)；
    #   2. 对每个键的分块（按 FlashAttention-2 的做法，外面再套一层遍历查询分块的循环）：
    #      s = 这个分块缩放后的分数（因果掩码屏蔽处为 -inf，用全局下标），
    #      m_new = max(m, rowmax(s))，alpha = exp(m - m_new)，p = exp(s - m_new)，
    #      l = alpha * l + rowsum(p)，acc = alpha * acc + p @ v_tile，m = m_new；
    #   3. 返回 acc / l 和 m + log(l)。
    raise NotImplementedError("flash_attention：按分块做在线 softmax 的前向计算，返回 (out, lse)")
