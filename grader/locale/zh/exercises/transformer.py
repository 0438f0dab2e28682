"""完整的 Transformer：输入 token id，输出下一个 token 的 logits，再在上面做贪心解码。

    src (B, T_src) -> src_embed * sqrt(d_model) -> + pos -> encoder -> memory (B, T_src, d_model)
    tgt (B, T_tgt) -> tgt_embed * sqrt(d_model) -> + pos -> decoder(., memory) -> generator -> logits

为什么嵌入要乘以 sqrt(d_model)？位置编码的值在 [-1, 1] 之内。嵌入表一开始取得小一些，
标准差为 1/sqrt(d_model)（nn.init.normal_），乘以 sqrt(d_model) 之后标准差就是 1，
和位置编码一样大：谁也不会淹没谁。位置编码只有一个，即 `pos`，两边共用：
位置 p 在两边的含义相同。

训练时用 teacher forcing：解码器读入整个右移一位的真实目标序列
[start, y1, ..., y_{T-1}]，在所有位置上同时预测 [y1, ..., y_T]；它的因果自注意力
保证位置 t 看不到它之后的 token。

生成时没有真实的目标序列：源序列只编码**一次**，然后一步一步地解码。从
ys = [start_symbol] 开始；每一步解码 ys，取**最后一个**位置的 logits，把其中的 argmax
接到 ys 后面（贪心：每次都取最可能的 token）；ys 有 max_len 个 token 时停止。
"""

import math  # noqa: F401  (嵌入的缩放要用 math.sqrt)

import torch
from torch import nn

from .decoder import Decoder  # noqa: F401
from .encoder import Encoder  # noqa: F401
from .positional_encoding import PositionalEncoding  # noqa: F401


class Transformer(nn.Module):
    """编码器-解码器 Transformer：src (B, T_src) 和 tgt (B, T_tgt) 的 token id -> logits (B, T_tgt, tgt_vocab)。

    参数：
        src_vocab, tgt_vocab: 源词表和目标词表的 token 个数。
        d_model, n_heads, n_layers, d_ff, dropout: 与 Encoder 和 Decoder 相同（两者都是 n_layers 层）。
        max_seq_len: 最长的序列长度：用于位置编码表和解码器的因果掩码。

    必需的属性名（评分程序按这些名字加载权重）：
        src_embed, tgt_embed: nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model)
        pos: PositionalEncoding(d_model, max_seq_len, dropout)，两边共用
        encoder: Encoder(n_layers, d_model, n_heads, d_ff, dropout)
        decoder: Decoder(n_layers, d_model, n_heads, d_ff, dropout, max_seq_len)
        generator: nn.Linear(d_model, tgt_vocab)，把特征变成 logits（不做 softmax）
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 128, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int = 512, dropout: float = 0.1, max_seq_len: int = 512) -> None:
        super().__init__()
        # TODO：记下 d_model；创建上面这六个模块；用
        #   nn.init.normal_(embed.weight, std=d_model ** -0.5) 初始化两张嵌入表。
        raise NotImplementedError("transformer：创建 src_embed、tgt_embed、pos、encoder、decoder、generator")

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, T_src) token id -> memory (B, T_src, d_model)；src_mask：可选的保留掩码（填充）。"""
        # TODO：返回 encoder(pos(src_embed(src) * sqrt(d_model)), src_mask)。
        raise NotImplementedError("transformer：encode 要计算 encoder(pos(src_embed(src) * sqrt(d_model)))")

    def decode(self, memory: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
               tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """memory (B, T_src, d_model)，tgt (B, T_tgt) token id -> (B, T_tgt, d_model)，尚未经过 generator。"""
        # TODO：返回 decoder(pos(tgt_embed(tgt) * sqrt(d_model)), memory, src_mask, tgt_mask)。
        raise NotImplementedError("transformer：decode 要计算 decoder(pos(tgt_embed(tgt) * sqrt(d_model)), memory)")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """teacher forcing：src (B, T_src)，tgt (B, T_tgt) -> logits (B, T_tgt, tgt_vocab)。

        logits 是原始分数：不做 softmax（交叉熵和 argmax 都直接接收它们）。
        """
        # TODO：先 memory = encode(src, src_mask)，再 return generator(decode(memory, tgt, src_mask, tgt_mask))。
        raise NotImplementedError("transformer：forward 要计算 generator(decode(encode(src), tgt))")


def greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, start_symbol: int) -> torch.Tensor:
    """每一步都取最可能的 token 来生成。

    参数：
        model: 一个 Transformer（先调用 model.eval()）。
        src: (B, T_src) token id。
        max_len: 要返回的 token 个数，包括起始符。
        start_symbol: 每个输出开头的那个 token。

    返回：
        (B, max_len)，int64（torch.long），与 src 在同一个 device 上；第 0 列是 start_symbol。
    """
    # TODO：在 torch.no_grad() 之下：
    #   1. memory = model.encode(src)，只算一次                                 (B, T_src, d_model)
    #   2. ys = torch.full((B, 1), start_symbol, dtype=torch.long, device=src.device)
    #   3. 重复 max_len - 1 次：out = model.decode(memory, ys)                  (B, t, d_model)
    #      next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)  (B, 1)
    #      ys = torch.cat([ys, next_token], dim=1)                              (B, t + 1)
    #   4. return ys                                                            (B, max_len)
    raise NotImplementedError("transformer：greedy_decode，只编码一次，然后把 argmax 得到的 token 接上 max_len - 1 次")
