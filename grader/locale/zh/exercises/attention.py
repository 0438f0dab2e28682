"""缩放点积注意力：每个查询都对值做一次加权平均。

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

每个查询都和每个键做点积，算出一个分数；对键做 softmax，把一个查询的那一行分数变成
权重：每个权重都 >= 0，总和为 1；这个查询的输出，就是用同样的权重对值向量加权求和。
Q 和 K 必须有相同的宽度 d_k，点积才算得出来；V 的宽度 d_v 可以不同，它就是输出的宽度。

为什么要除以 sqrt(d_k)？假设查询和键的 d_k 个分量相互独立，均值为 0、方差为 1，
那么它们的点积是 d_k 个这样的乘积之和，方差就是 d_k：d_k = 512 时，分数的标准差约为 23。
对相差这么大的数做 softmax，结果几乎是 one-hot，落在梯度接近 0 的饱和区，学习就停滞了。
除以 sqrt(d_k) 之后，不管维度多大，方差都回到 1。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)
from collections.abc import Callable

import torch


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """让每个查询关注所有的键，返回混合后的值和注意力权重。

    `...` 表示任意多个前导维度（批量、头……），所有输入的前导维度都相同。

    参数：
        query: (..., L_q, d_k)，每个查询位置一行。
        key: (..., L_k, d_k)，每个键位置一行。
        value: (..., L_k, d_v)，每个键位置携带的向量。
        dropout: 可选，作用在权重上的模块或可调用对象（例如 nn.Dropout）。
        mask: 可选的保留掩码，可广播到 (..., L_q, L_k)：True / 非零表示“这个查询可以
            关注这个键”，False / 0 表示被屏蔽。要在 softmax 之前把被屏蔽的分数设为 -inf
            （或一个很大的负数），这样它们的权重恰好为 0，每一行之和仍然是 1；
            等 softmax 之后再把权重置零就太晚了。

    返回：
        output: (..., L_q, d_v)，等于 p_attn @ value。
        p_attn: (..., L_q, L_k)，经过 dropout 之后的权重（也就是算 output 时用的那个）。
            softmax 沿最后一个维度（键）做：每个查询的那一行之和为 1。
    """
    # TODO：保持输入的 dtype 和 device，
    #   1. 分数 scores (..., L_q, L_k)：query 乘以只转置了最后两个维度的 key
    #      （key.transpose(-2, -1)，前导维度留在原位），再除以 sqrt(d_k)；
    #   2. 被屏蔽的分数（mask == 0）设为 -inf；
    #   3. p_attn：沿键的维度做 softmax，给了 dropout 就再做 dropout；
    #   4. 返回 p_attn @ value 和 p_attn。
    raise NotImplementedError("attention：计算 softmax(Q K^T / sqrt(d_k)) V，返回 (output, p_attn)")
