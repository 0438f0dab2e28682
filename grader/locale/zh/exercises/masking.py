"""因果掩码：每个位置只能看自己和过去，绝不能看未来。

融合上下文最简单的办法，是把位置 t 换成位置 0..t 的平均值。下面是三种写法，
一种比一种快（x 的形状是 (B, T, C)）：

    # 1. 循环：每个位置求一次均值（小心：要写进一个新张量，不能写回 x，
    #    否则后面的行会对已经平均过的行再求平均）
    out[:, t] = x[:, :t+1].mean(dim=1)
    # 2. 把同样的均值写成加权和：(T, T) 权重矩阵的第 t 行在第 0..t 列是 1/(t+1)，
    #    之后的列是 0；out[:, t] = weights[t] @ x，所以 out = weights @ x
    # 3. 完全不用循环：从分数出发（这里全是 0，即每个位置一样重要），用 -inf 屏蔽上三角，
    #    再让 softmax 把每一行变成同样的那些权重
    weights = torch.zeros(T, T).masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
    out = weights.softmax(dim=-1) @ x   # (T, T) @ (B, T, C) -> (B, T, C)

第 3 种写法就是注意力的做法，只不过注意力的分数来自查询和键，而不是全都相等。
因果掩码有两种写法，softmax 之后的结果相同：

- 由 1 和 0 组成的保留掩码（1 = 可以关注，在对角线及其下方），用法是
  `scores.masked_fill(keep == 0, float("-inf"))`；
- 由 0（可以关注）和 -inf（被屏蔽）组成的加性掩码，用法是 `scores + mask`。

无论哪种，被屏蔽的分数都会变成 -inf，而 exp(-inf) = 0，所以它的权重恰好为 0，
每一行留下的权重之和仍然是 1。
"""

import torch


def causal_average(x: torch.Tensor) -> torch.Tensor:
    """把每个位置换成它自己和它之前所有位置的均值。

    参数：
        x: (B, T, C)。

    返回：
        (B, T, C)，dtype 和 device 与 x 相同，out[:, t] = x[:, :t+1].mean(dim=1)。
        要向量化：不能对 T 写 Python 循环（评分程序会统计你执行的运算）。
    """
    # TODO：在 x 的 dtype 和 device 上构造 (T, T) 的平均权重（用上面的第 2 或第 3 种写法），
    #   返回 weights @ x。
    raise NotImplementedError("masking：causal_average，不用循环求位置 0..t 的均值")


def weight_mask_and_normalization(weight: torch.Tensor) -> torch.Tensor:
    """屏蔽对角线上方的分数，再对每一行做 softmax。

    参数：
        weight: (..., T, T) 分数，前面可以有任意多个维度。

    返回：
        (..., T, T)：第 i 行只分布在第 0..i 列上（i 之后的元素恰好为 0），且和为 1。
    """
    # TODO：把对角线上方的元素设为 -inf（用 tril 保留掩码和 0 比较），
    #   再沿最后一个维度做 softmax。
    raise NotImplementedError("masking：weight_mask_and_normalization，先屏蔽上三角，再做 softmax")


def create_look_ahead_mask(seq_len: int) -> torch.Tensor:
    """保留掩码：在列 <= 行的地方（过去和现在）非零，对角线上方为 0。

    返回：
        (1, 1, seq_len, seq_len)，前面两个 1 会在批量和头这两个维度上广播。
    """
    # TODO：全 1 矩阵的下三角（含对角线），view 成 (1, 1, L, L)。
    raise NotImplementedError("masking：create_look_ahead_mask，形状为 (1, 1, L, L) 的下三角保留掩码")


def causal_mask(seq_len: int) -> torch.Tensor:
    """加性掩码：对角线及其下方为 0，上方为 -inf，用来加到分数上。

    返回：
        (1, 1, seq_len, seq_len)，浮点型。
    """
    # TODO：一个填满 -inf 的 (1, 1, L, L) 张量，只保留它的严格上三角
    #   （torch.triu 加上 diagonal=1，会把其余部分变成 0）。
    raise NotImplementedError("masking：causal_mask，由 0 和 -inf 组成的 (1, 1, L, L) 加性掩码")
