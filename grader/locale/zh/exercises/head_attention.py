"""因果自注意力的一个头：每个 token 从它自己和它的过去收集信息。

这就是课程实验里的那个模块（nanoGPT 的 `Head`）。x 中的每个 token 都要投影三次：
查询（“我在找什么？”）、键（“我包含什么？”）和值（“被选中时我传出什么”）。
token t 用点积 query_t . key_s 给每个 token s 打分，softmax 把分数变成权重，
t 的输出就是值的加权和：

    out = softmax(mask(q @ k^T / sqrt(head_size))) @ v

一个头只关注 token 之间的一种关系；multi_head_attention.py 会同时运行多个头。

因果：预测 token t 后面的内容时，模型不能偷看 t 之后的 token。实验课里那个全 1 的
下三角矩阵规定了谁可以看谁（第 t 行在第 0..t 列为 1）；矩阵中为 0 的地方，分数变成 -inf，
softmax 之后这些权重恰好为 0。按最长的序列 block_size 只构造一次，并把它存为
*缓冲区*（self.register_buffer）：它会跟着 .to(device) 移动，也会保存在 state_dict 里，
但它不是参数，所以优化器永远不会改动它。一个批次可能比 block_size 短：
取左上角的 (T, T) 部分，即 self.tril[:T, :T]。

缩放时除以 sqrt(head_size)，也就是 q 和 k 做点积时的宽度，而不是 x 的宽度 sqrt(n_embd)
（至于为什么要缩放，见 attention.py）。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch
from torch import nn


class HeadAttention(nn.Module):
    """一个因果自注意力头：(B, T, n_embd) -> (B, T, head_size)。

    参数：
        n_embd: 每个输入 token 的宽度。
        head_size: 查询、键、值以及输出的宽度。
        block_size: 这个头能接受的最长序列（T）；也是 `tril` 的大小。
        dropout: 训练时把一个注意力权重置零的概率。

    必需的属性名（评分程序按这些名字加载权重）：
        key, query, value: nn.Linear(n_embd, head_size, bias=False)
        tril: 形状为 (block_size, block_size) 的缓冲区（不是参数），对角线及其下方为 1，
            上方为 0
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：创建 self.key、self.query、self.value（不带偏置），注册缓冲区 "tril"
        #   （对 (block_size, block_size) 的全 1 矩阵取 torch.tril），再创建 self.dropout。
        raise NotImplementedError("head_attention：创建 key、query、value、缓冲区 tril 和 dropout")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """让每个位置关注它自己和它之前的位置。

        参数：
            x: (B, T, n_embd)，T <= block_size。

        返回：
            (B, T, head_size)：第 t 行是位置 0..t 的值的加权和。
        """
        # TODO：
        #   1. k, q, v = self.key(x), self.query(x), self.value(x)        形状都是 (B, T, head_size)
        #   2. 分数 q @ k.transpose(-2, -1) 除以 sqrt(head_size)          (B, T, T)
        #   3. self.tril[:T, :T] == 0 处的分数设为 -inf                   （屏蔽未来）
        #   4. 沿最后一个维度（键）做 softmax，再对这些权重做 self.dropout
        #   5. 返回 weights @ v                                           (B, T, head_size)
        raise NotImplementedError("head_attention：对过去的位置计算带因果掩码、经过缩放的注意力")
