"""正弦位置编码：告诉注意力每个 token 在序列中的位置。

注意力本身不管顺序：把 token 打乱，每个输出也会以同样的方式被打乱。所以在第一层之前，
要给每个位置 p 的嵌入加上一个固定的向量：

    pe[p, 2i]   = sin(p / 10000^(2i / d_model))
    pe[p, 2i+1] = cos(p / 10000^(2i / d_model))      其中 i = 0 .. d_model/2 - 1

每一对列 (2i, 2i+1) 都是圆上一个转动的点；第 0 对列每个位置转一弧度，越往后的列对
转得越慢（波长从 2*pi 一直到 10000 * 2*pi）。为什么用 sin 和 cos？
- 有界：不管位置是多少，每个值都在 [-1, 1] 之内，不会盖过嵌入本身；
- 各不相同：没有两个位置（远远超过任何 max_len 也是如此）会得到相同的向量；
- 相对位置：pe[p + k] 是 pe[p] 的一个固定线性变换（每一对列各转一个角度），对每个 p
  都一样，所以“往回数 k 个 token”这件事，模型的一层只需学一次，所有位置都能用。

这些数永远不变，所以在 __init__ 里把表算一次，用 self.register_buffer("pe", pe) 存为
缓冲区，而不是 nn.Parameter：缓冲区会跟着模块经过 .to(device) / .double()，也会保存在
state_dict 里，而优化器永远不会训练它。
1 / 10000^(2i / d_model) 的常见写法是 torch.exp(-(2i) * math.log(10000.0) / d_model)。
"""

import math  # noqa: F401  (计算频率时要用 math.log)

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    """给一批嵌入加上位置 0..T-1 的正弦编码，再做 dropout。

    参数：
        d_model: 嵌入的宽度（偶数）。
        max_len: 表中的位置个数；输入最长只能有这么长。
        dropout: nn.Dropout 的概率，作用在相加的结果上。

    属性（评分程序会找这些名字）：
        pe: 缓冲区 (1, max_len, d_model)，float32，pe[0, p] 是位置 p 的编码
            （偶数列是 sin，奇数列是 cos）；最前面的 1 在 B 上广播。
        dropout: nn.Dropout(dropout)。
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：位置 position (max_len, 1)，以及频率 1 / 10000^(2i / d_model)，形状为
        #   (d_model / 2,)；建一张 (max_len, d_model) 的全 0 表：sin 填进第 0::2 列，cos 填进
        #   第 1::2 列；把它以形状 (1, max_len, d_model) 注册为缓冲区 "pe"；
        #   创建 self.dropout。
        raise NotImplementedError("positional_encoding：构造 sin/cos 表，并把它注册为缓冲区 pe")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """加上前 T 个位置的编码。

        参数：
            x: (B, T, d_model) 嵌入，T <= max_len。

        返回：
            (B, T, d_model)：dropout(x + pe[:, :T])；eval 模式下就是 x + pe[:, :T]。
        """
        # TODO：把 self.pe[:, :T]（T = x.size(1)）加到 x 上，再对相加的结果做 self.dropout。
        raise NotImplementedError("positional_encoding：返回 dropout(x + pe[:, :T])")
