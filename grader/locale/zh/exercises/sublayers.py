"""每个 Transformer 层都在注意力外面包上的两个部件：前馈网络和残差连接。

逐位置的前馈网络。注意力在位置*之间*混合信息；前馈网络接着对每个位置单独做变换，
每个 token 用的都是同一个小 MLP：

    FFN(x) = w2(dropout(relu(w1(x))))      w1: d_model -> d_ff（更宽，通常是 4 倍），w2: d_ff -> d_model

nn.Linear 作用在最后一个维度上，所以输入 (B, T, d_model)，输出形状不变，不需要任何 reshape。

残差连接，pre-norm。每个子层（注意力或前馈网络）都这样包起来：

    out = x + dropout(sublayer(norm(x)))

- 残差 `x + ...` 是一条恒等通路（课程笔记里的“跳线”）：输出是 x 加上一个修正量，
  梯度经过 `+` 原封不动地传回 x，不管堆了多少层都是如此。深层网络能训练得动，靠的就是它；
  如果子层返回 0，这个块就原样返回 x。
- pre-norm：LayerNorm 作用在子层的*输入*上，所以每个子层看到的特征均值为 0、方差为 1，
  而 x 本身一路传下去，从不被归一化。原论文用的是 post-norm，即 norm(x + sublayer(x))；
  课程笔记把这两个名字弄反了，但笔记里的代码和本套练习一样，都是 pre-norm。
  （pre-norm 的堆叠输出没有经过归一化，所以编码器和解码器的最后还要再接一个 LayerNorm。）
- dropout 作用在子层的输出上，在它加到 x 之前，而且只在训练时起作用。
"""

from collections.abc import Callable

import torch
from torch import nn


class FeedForward(nn.Module):
    """每个位置上都是同一个两层 MLP：(..., d_model) -> (..., d_model)。

    参数：
        d_model: 每个 token 的宽度。
        d_ff: 隐藏层的宽度。
        dropout: 训练时把一个隐藏层激活值置零的概率。

    必需的属性名（评分程序按这些名字加载权重）：
        w1: nn.Linear(d_model, d_ff)，带偏置
        w2: nn.Linear(d_ff, d_model)，带偏置
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：创建 self.w1、self.w2 和 self.dropout。
        raise NotImplementedError("sublayers：FeedForward，创建 w1、w2 和 dropout")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """参数：x (..., d_model)。返回：(..., d_model)，即 w2(dropout(relu(w1(x))))。"""
        # TODO：w1 (..., d_ff)，relu，dropout，再 w2 (..., d_model)。
        raise NotImplementedError("sublayers：FeedForward.forward，返回 w2(dropout(relu(w1(x))))")


class ResidualConnection(nn.Module):
    """把一个子层包进 pre-norm 残差连接：x + dropout(sublayer(norm(x)))，(..., d_model) -> 形状不变。

    参数：
        d_model: 每个 token 的宽度，也是 LayerNorm 的大小。
        dropout: 训练时把子层输出的一个元素置零的概率。

    必需的属性名（评分程序按这些名字加载权重）：
        norm: nn.LayerNorm(d_model)
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：创建 self.norm 和 self.dropout。
        raise NotImplementedError("sublayers：ResidualConnection，创建 norm 和 dropout")

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """参数：
            x: (..., d_model)。
            sublayer: 任意可调用对象 (..., d_model) -> (..., d_model)：模块、函数或
                lambda 都可以；用 sublayer(y) 调用它。

        返回：
            (..., d_model)，即 x + dropout(sublayer(norm(x)))。
        """
        # TODO：先归一化 x，再应用子层、做 dropout，最后加上 x 本身（不是 norm(x)）。
        raise NotImplementedError("sublayers：ResidualConnection.forward，返回 x + dropout(sublayer(norm(x)))")
