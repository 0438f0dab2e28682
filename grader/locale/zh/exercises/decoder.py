"""Transformer 解码器：读取编码器的 memory，一次一个 token 地生成目标序列。

每个解码器层有**三个**子层，各自包在一个 pre-norm 的 ResidualConnection（sublayers.py）里：

1. 对目前为止生成的目标序列做带掩码的（因果）自注意力。推理时，解码器由 token 0..t
   生成 token t+1；训练时，整个目标序列一次性输入（所有位置并行计算，即
   teacher forcing），所以必须挡住位置 t，不让它偷看本该由它预测的 token t+1.. 。
   `self_attn` 是用 is_causal=True 构造的 MultiHeadAttention：它自己会加上前瞻掩码。
   `tgt_mask` 是叠加在它之上的一个可选的**额外**保留掩码，例如目标序列的填充
   (B, 1, 1, T_tgt)。
2. 交叉注意力（编码器-解码器注意力）：查询来自解码器的 x，键和值来自编码器的输出
   `memory`。目标序列正是在这里读取源序列：每个目标位置挑出它需要的源位置。
   它不是因果的：源序列完全已知。`src_mask`（编码器的填充掩码，例如 (B, 1, 1, T_src)）
   让它避开源序列的填充部分。T_tgt 和 T_src 可以不同。
3. 逐位置的前馈网络。

整个堆叠是 n_layers 个互不相同的 DecoderLayer（nn.ModuleList），每一层读的都是同一个
memory，最后再接一个 nn.LayerNorm：pre-norm 层不会归一化残差通路。
"""

import torch
from torch import nn

from .config import ModelArgs  # noqa: F401  (MultiHeadAttention 的尺寸)
from .multi_head_attention import MultiHeadAttention  # noqa: F401  (两种注意力都用它)
from .sublayers import FeedForward, ResidualConnection  # noqa: F401


class DecoderLayer(nn.Module):
    """因果自注意力、对 memory 的交叉注意力、前馈网络；各自包在 pre-norm 残差连接里。

    参数：
        d_model, n_heads, d_ff, dropout: 与 EncoderLayer 相同。
        max_seq_len: 最长的目标序列；也是 self_attn 因果掩码的大小。

    必需的属性名（评分程序按这些名字加载权重）：
        self_attn: MultiHeadAttention(ModelArgs(dim=d_model, n_heads=n_heads, dropout=dropout,
            max_seq_len=max_seq_len), is_causal=True)
        cross_attn: MultiHeadAttention(同样的 ModelArgs, is_causal=False)
        feed_forward: FeedForward(d_model, d_ff, dropout)
        residual1, residual2, residual3: ResidualConnection(d_model, dropout)，每个子层一个
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512) -> None:
        super().__init__()
        # TODO：创建 self.self_attn、self.cross_attn、self.feed_forward 和 residual1..residual3。
        raise NotImplementedError("decoder：DecoderLayer，创建 self_attn、cross_attn、feed_forward、residual1..3")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """参数：
            x: (B, T_tgt, d_model)，目前为止的目标序列（T_tgt <= max_seq_len）。
            memory: (B, T_src, d_model)，编码器的输出。
            src_mask: 可选的源序列保留掩码，可广播到 (B, n_heads, T_tgt, T_src)。
            tgt_mask: 可选的、额外的目标序列保留掩码，可广播到 (B, n_heads, T_tgt, T_tgt)。

        返回：
            (B, T_tgt, d_model)。
        """
        # TODO：
        #   1. x = self.residual1(x, lambda y: self.self_attn(y, y, y, tgt_mask))
        #   2. x = self.residual2(x, lambda y: self.cross_attn(y, memory, memory, src_mask))
        #      （查询来自解码器，键和值来自 memory）
        #   3. return self.residual3(x, self.feed_forward)
        raise NotImplementedError("decoder：DecoderLayer.forward，自注意力、交叉注意力、前馈网络")


class Decoder(nn.Module):
    """n_layers 个 DecoderLayer，最后接一个 LayerNorm：(B, T_tgt, d_model) -> (B, T_tgt, d_model)。

    参数：
        n_layers: 层数，每层都有自己的权重。
        d_model, n_heads, d_ff, dropout, max_seq_len: 与 DecoderLayer 相同。

    必需的属性名（评分程序按这些名字加载权重）：
        layers: 由 n_layers 个互不相同的 DecoderLayer 对象组成的 nn.ModuleList
        norm: nn.LayerNorm(d_model)，用在最后一层之后
    """

    def __init__(
        self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, max_seq_len: int = 512
    ) -> None:
        super().__init__()
        # TODO：创建 self.layers（n_layers 层，每层一个新的 DecoderLayer）和 self.norm。
        raise NotImplementedError("decoder：Decoder，创建 layers（nn.ModuleList）和 norm")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """参数和返回值：与 DecoderLayer 相同；每一层读的都是同一个 memory 和同样的掩码。"""
        # TODO：让 x 依次经过每一层（x, memory, src_mask, tgt_mask），最后做 self.norm。
        raise NotImplementedError("decoder：Decoder.forward，每一层都带上 memory 和掩码，最后做 norm")
