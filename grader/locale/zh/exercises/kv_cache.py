"""KV 缓存：一次解码一个 token，不再重算过去的键和值。

语言模型一步写出一个 token，每一步新的 token 都要关注它之前的所有 token。如果每一步都把
整个前缀重算一遍，每一步要做 O(T) 次投影，总共 O(T^2) 次。但在因果注意力里，一个过去的
token 一旦写出，关于它的一切都不会再变：它的键和值只取决于它自己（以及通过 RoPE 取决于它的
位置），而它从不关注它之后的 token。所以把它们留着：缓存保存到目前为止见过的每个位置的键和值，
每一步只计算新 token 的查询、键和值，把它的键和值追加到缓存里，再让这一个新的查询关注缓存中
所有的键。

为什么这是精确的，而不是近似？因果注意力的第 t 行是

    out[t] = sum_{j <= t} softmax_j(q_t . k_j / sqrt(head_dim)) v_j

它读的是 q_t，以及 j <= t 的 k_j、v_j：没有一样会被后来的 token 改变。带缓存的一步算的正是
这一行。要让结果是同一个数，有两件事必须做对：

- 位置：新的 token 位于位置 T_past .. T_past + T - 1，T_past 是缓存里已有的位置数。RoPE 必须
  按这些位置旋转它们，而不是按 0 .. T-1（否则只有一个 token 的一步永远在位置 0）；
- 掩码：T 个新查询能看到全部 T_past 个缓存的键，以及新键中截至它自己的那些，所以当
  j <= T_past + t 时，查询 t 保留键 j：这是一个 (T, T_past + T) 矩阵的下三角，对角线向右移了
  T_past，即 torch.ones(T, T_past + T).tril(diagonal=T_past)。一个 (T, T) 的下三角，或者
  F.scaled_dot_product_attention(..., is_causal=True)（它的三角从左上角对齐），只有在
  T_past = 0 时才对。只有一个新 token 时，什么都不需要屏蔽。

缓存 RoPE *之后*的键：一个键的旋转只取决于它自己的位置，所以它在算出来时转一次，存下的就是
转好的。缓存是一对 (k, v)，每个形状为 (B, n_heads, T_past, head_dim)；沿 dim 2（位置）追加。
位置受 RoPE 的表限制：超过 max_seq_len 就没有角度了，所以要用 ValueError 拒绝。

先预填充，再逐步解码：对整个提示（prompt）调用一次（cache=None，位置 0 .. T-1），返回提示的
缓存；之后每次调用传入这个缓存，拿回长了一个位置的缓存。逐个 token 解码，得到的输出和对
整个序列调用一次相同。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch
from torch import nn

from .config import ModelArgs
from .rope import RotaryEmbedding  # noqa: F401  (你的 rope.py：用它构建 self.rope)


class CachedSelfAttention(nn.Module):
    """带 RoPE 和 KV 缓存的因果多头自注意力：x (B, T, dim) -> (输出 (B, T, dim), 缓存)。

    参数：
        args: 带有 dim、n_heads、dropout 和 max_seq_len 的 ModelArgs。

    必须使用的属性名（评分器按这些名字加载权重）：
        n_heads, head_dim = dim // n_heads
        wq, wk, wv, wo: nn.Linear(dim, dim, bias=False)
        rope: RotaryEmbedding(head_dim, args.max_seq_len)，来自 rope.py
        attn_dropout, resid_dropout: nn.Dropout(args.dropout)，分别作用于注意力权重和输出
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        # TODO：设置 n_heads、head_dim（并记下 args.max_seq_len）；创建 wq、wk、wv、wo、rope、attn_dropout、
        #   resid_dropout。
        raise NotImplementedError("kv_cache：创建 wq、wk、wv、wo、rope 和两个 dropout")

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """让 T 个新 token 因果地关注缓存中的位置和它们自己。

        参数：
            x: (B, T, dim)，新的 token。
            cache: None（这些 token 从位置 0 开始），或 (k, v)，每个形状为 (B, n_heads, T_past, head_dim)：
                之前 T_past 个位置的键（RoPE 之后）和值。

        返回：
            out: (B, T, dim)。
            cache: (k, v)，每个形状为 (B, n_heads, T_past + T, head_dim)：先是旧的条目，后是新的。

        异常：
            T_past + T > max_seq_len 时抛出 ValueError。
        """
        # TODO：从缓存得到 T_past；超过 max_seq_len 就拒绝；q、k、v 拆成多头 (B, n_heads, T, head_dim)；
        #   在位置 T_past .. T_past + T - 1 旋转 q 和 k；把 k 和 v 沿 dim 2 追加到缓存；对全部 T_past + T
        #   个键计算分数，用 tril(diagonal=T_past) 加掩码；softmax，attn_dropout，乘以值；合并多头，
        #   wo，resid_dropout；返回输出和新的缓存。
        raise NotImplementedError("kv_cache：关注缓存的键和新的键，返回变长了的缓存")
