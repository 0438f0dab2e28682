"""多头注意力：几个注意力头并排工作，每个头自己决定去找哪一种关系。

一个头只关注 token 之间的一种关系（比如主语和谓语），多个头就能关注多种关系
（介词和宾语、冠词和名词……）。n_heads 个头各自在宽度为 head_dim = dim // n_heads 的
一段特征上工作；它们的输出并排拼起来，又是 (B, T, dim)，再经过最后一个线性层 wo 混合。

用一个合并的投影代替 n_heads 个小投影。第 h 个头的查询本来需要一个自己的
(head_dim x dim) 权重。把 n_heads 个权重叠成一个 (dim x dim) 矩阵：先乘以叠起来的矩阵，
再把结果切成宽度为 head_dim 的若干段，得到的恰好就是那 n_heads 个小乘积
（矩阵相乘再切分 == 先切分权重再分别相乘）。所以第 h 个头使用 wq、wk、wv 输出的
第 [h*head_dim, (h+1)*head_dim) 行，以及 wo 输入中同一范围的列。

拆分多头：self.wq(q) 的形状是 (B, T, dim)；.view(B, T, n_heads, head_dim) 把每个 token 的
dim 个特征切成各个头的那一段，再 .transpose(1, 2) 变成 (B, n_heads, T, head_dim)，
这样每个头都是一个 (T, head_dim) 矩阵，注意力就在它上面计算。直接 .view 或 .reshape 成
(B, n_heads, T, head_dim)，形状虽然对，内容却是错的：它按内存顺序把一串数字依次分出去，
于是一个“头”会拿到好几个不同 token 的片段。合并多头就反过来：
.transpose(1, 2).contiguous().view(B, T, dim)。

缩放时除以 sqrt(head_dim)，也就是每次点积中向量的宽度，而不是 sqrt(dim)。

因果（解码器的自注意力）：注册缓冲区 `mask` = masking.py 中的 causal_mask(max_seq_len)
（对角线及其下方为 0，上方为 -inf；复用你写好的函数），并把它的左上角
self.mask[:, :, :T_q, :T_k] 加到分数上。另外还可以传入一个保留掩码（例如填充掩码：
0 = 被屏蔽），叠加在因果掩码之上。如果你把两个掩码合成一个保留掩码，
就可以复用 attention.py 中的 attention() 来完成“分数 - softmax - dropout - 值”这几步。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch
from torch import nn

from .config import ModelArgs
from .masking import causal_mask  # noqa: F401  (用它来构造因果缓冲区)


class MultiHeadAttention(nn.Module):
    """多头注意力：q (B, T_q, dim)，k 和 v (B, T_k, dim) -> (B, T_q, dim)。

    自注意力把同一个 x 同时作为 q、k、v 传入；交叉注意力（解码器看编码器）的查询来自
    一个序列，键和值来自另一个序列，所以 T_q 可以和 T_k 不同。

    参数：
        args: 带有 dim、n_heads、dropout 和 max_seq_len 的 ModelArgs。
        is_causal: 为 True 时，q 的位置 t 只能关注键的位置 0..t。

    异常：
        args.dim 不能被 args.n_heads 整除时，抛出 ValueError（或 AssertionError）。

    必需的属性名（评分程序按这些名字加载权重）：
        n_heads, head_dim = dim // n_heads
        wq, wk, wv, wo: nn.Linear(dim, dim, bias=False)
        attn_dropout, resid_dropout: nn.Dropout(args.dropout)，分别作用在注意力权重上
            和输出上
        mask: 缓冲区 causal_mask(args.max_seq_len)，形状为 (1, 1, max_seq_len, max_seq_len)，
            只在 is_causal 时才有
    """

    def __init__(self, args: ModelArgs, is_causal: bool = False) -> None:
        super().__init__()
        # TODO：dim 不能被 n_heads 整除时，
        #   raise ValueError(f"dim {args.dim} 不能被 n_heads {args.n_heads} 整除")；
        #   设置 n_heads、head_dim 和 is_causal；创建 wq、wk、wv、wo、attn_dropout、resid_dropout；
        #   is_causal 时调用 self.register_buffer("mask", causal_mask(args.max_seq_len))。
        raise NotImplementedError("multi_head_attention：检查 dim % n_heads，创建 wq、wk、wv、wo、两个 dropout 和 mask")

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """让每个查询位置关注各个键位置，n_heads 个头同时计算。

        参数：
            q: (B, T_q, dim)，查询。
            k, v: (B, T_k, dim)，键和值。
            mask: 可选的保留掩码，可广播到 (B, n_heads, T_q, T_k)：非零 = 可以关注，
                0 = 被屏蔽；is_causal 时与因果掩码叠加。

        返回：
            (B, T_q, dim)。
        """
        # TODO：
        #   1. xq = self.wq(q).view(B, T_q, n_heads, head_dim).transpose(1, 2)   (B, nh, T_q, hd)；
        #      xk 由 k、xv 由 v 同样得到，长度为 T_k
        #   2. scores = xq @ xk.transpose(-2, -1) / sqrt(head_dim)               (B, nh, T_q, T_k)
        #   3. 因果时：scores + self.mask[:, :, :T_q, :T_k]；给了 mask 时：
        #      mask == 0 处的分数设为 -inf
        #   4. 沿键的维度做 softmax，再做 self.attn_dropout；乘以 xv             (B, nh, T_q, hd)
        #   5. 合并多头：.transpose(1, 2).contiguous().view(B, T_q, dim)
        #   6. 返回 self.resid_dropout(self.wo(merged))                          (B, T_q, dim)
        raise NotImplementedError("multi_head_attention：拆分多头、计算注意力、合并多头，再用 wo 投影")
