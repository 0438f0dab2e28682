"""Transformer 编码器：由相同的层堆叠而成，把源序列变成 `memory`。

每一层做两件事，各自包在一个 pre-norm 的 ResidualConnection（sublayers.py）里：

    x = x + dropout(self_attn(norm1(x)))     每个位置都看源序列的所有位置
    x = x + dropout(feed_forward(norm2(x)))  然后每个位置各自做变换

这里的自注意力**不是**因果的：整个源句子事先就已知，所以每个词都可以看它前后的词。
唯一的掩码是填充用的保留掩码：一个批次中的句子被填充到同一长度，`mask` (B, 1, 1, T)
在真实 token 处为 True，让所有位置都不去关注填充部分。它会在头和查询这两个维度上广播。

堆叠的 n_layers 层各有**自己的**权重：在 nn.ModuleList 中构造 n 个独立的 EncoderLayer
对象。（[layer] * n 是把同一个对象重复 n 次，这样所有“层”都共用同一份权重。）
每一层有自己的两个残差连接，每个残差连接又有自己的 LayerNorm。

最后的 LayerNorm：在 pre-norm 层中，残差通路 x 从不被归一化，它的数值尺度会一层层变大。
在最后一层之后再接一个 nn.LayerNorm，交给解码器（以及下一阶段）的就是归一化后的特征。
"""

import torch
from torch import nn

from .config import ModelArgs  # noqa: F401  (MultiHeadAttention 的尺寸)
from .multi_head_attention import MultiHeadAttention  # noqa: F401  (自注意力)
from .sublayers import FeedForward, ResidualConnection  # noqa: F401


class EncoderLayer(nn.Module):
    """先自注意力，再前馈网络，各自包在 pre-norm 残差连接里：(B, T, d_model) -> (B, T, d_model)。

    参数：
        d_model: 每个 token 的宽度。
        n_heads: 注意力头的个数（d_model 必须能被它整除）。
        d_ff: 前馈网络的隐藏层宽度。
        dropout: dropout 概率，用于注意力、前馈网络和残差连接。

    必需的属性名（评分程序按这些名字加载权重）：
        self_attn: MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout)),
            is_causal=False
        feed_forward: FeedForward(d_model, d_ff, dropout)
        residual1, residual2: ResidualConnection(d_model, dropout)，每个子层一个
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：创建 self.self_attn、self.feed_forward、self.residual1 和 self.residual2。
        raise NotImplementedError("encoder：EncoderLayer，创建 self_attn、feed_forward、residual1、residual2")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """参数：
            x: (B, T, d_model)。
            mask: 可选的保留掩码，可广播到 (B, n_heads, T, T)，例如填充掩码 (B, 1, 1, T)。

        返回：
            (B, T, d_model)。
        """
        # TODO：x = self.residual1(x, lambda y: self.self_attn(y, y, y, mask))   （q、k、v 都取自 y）
        #   然后返回 self.residual2(x, self.feed_forward)。
        raise NotImplementedError("encoder：EncoderLayer.forward，先自注意力再前馈网络，各带残差连接")


class Encoder(nn.Module):
    """n_layers 个 EncoderLayer，最后接一个 LayerNorm：(B, T, d_model) -> (B, T, d_model)。

    参数：
        n_layers: 层数，每层都有自己的权重。
        d_model, n_heads, d_ff, dropout: 与 EncoderLayer 相同。

    必需的属性名（评分程序按这些名字加载权重）：
        layers: 由 n_layers 个互不相同的 EncoderLayer 对象组成的 nn.ModuleList
        norm: nn.LayerNorm(d_model)，用在最后一层之后
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO：创建 self.layers（n_layers 层，每层一个新的 EncoderLayer）和 self.norm。
        raise NotImplementedError("encoder：Encoder，创建 layers（nn.ModuleList）和 norm")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """参数：x (B, T, d_model)；mask 与 EncoderLayer 相同，传给每一层。

        返回：
            (B, T, d_model)，编码器的输出（也就是解码器的 `memory`）。
        """
        # TODO：让 x 依次经过每一层（每层都带上 mask），最后做 self.norm。
        raise NotImplementedError("encoder：Encoder.forward，每一层都带上掩码，最后做 norm")
