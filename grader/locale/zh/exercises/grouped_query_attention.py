"""分组查询注意力（GQA）：许多查询头共享少数几个键/值头，KV 缓存随之变小。

模型生成文本时，要把已经见过的每个位置的键和值都保存下来（KV 缓存），每一层一份：
2（键和值）* n_layers * batch * seq_len * n_kv_heads * head_dim 个数。对大模型和长上下文来说，
把 GPU 显存占满的是这个缓存，而不是权重。查询从不缓存：每个新 token 算出自己的查询，用完就丢。

所以保留全部 n_heads 个查询头，但键和值只给 n_kv_heads 个头，每个头由一组
n_heads // n_kv_heads 个查询头共享。第 h 个查询头读第 h // (n_heads // n_kv_heads) 个键/值头：
8 个查询头、2 个键/值头时，头 0-3 读 KV 头 0，头 4-7 读 KV 头 1。缓存和 wk、wv 都缩小
n_heads / n_kv_heads 倍；查询仍然在找 n_heads 种不同的东西，只是到更少的地方去找。
两个极端各有名字：n_kv_heads == n_heads 是多头注意力（什么都不共享），n_kv_heads == 1 是
多查询注意力（MQA，每个查询头都读那唯一的键/值头）。Llama 2 70B 及其后继模型用 8 个。

共享并不需要新的计算：把键和值投影成 n_kv_heads 个头，再把每个头紧挨着自己重复
n_heads // n_kv_heads 次，kv0, kv0, kv1, kv1, ...（llama 的 repeat_kv，或
k.repeat_interleave(n_rep, dim=1)），然后和多头注意力完全一样地计算注意力。
k.repeat(1, n_rep, 1, 1) 形状相同、顺序却错了：它把头平铺成 kv0, kv1, kv0, kv1，
于是第 h 个头读到的是第 h % n_kv_heads 个 KV 头。

形状：x (B, T, dim)；wq(x) -> (B, n_heads, T, head_dim)；wk(x)、wv(x) -> (B, n_kv_heads, T,
head_dim)，重复成 (B, n_heads, T, head_dim)；分数 (B, n_heads, T, T)；输出 (B, T, dim)。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch
from torch import nn

from .config import ModelArgs


class GroupedQueryAttention(nn.Module):
    """因果的分组查询自注意力：x (B, T, dim) -> (B, T, dim)。

    参数：
        args: 带有 dim、n_heads 和 dropout 的 ModelArgs。
        n_kv_heads: 键/值头的个数；n_heads 必须是它的倍数。

    异常：
        args.dim % args.n_heads != 0 或 args.n_heads % n_kv_heads != 0 时抛出 ValueError。

    必须使用的属性名（评分器按这些名字加载权重）：
        wq: nn.Linear(dim, dim, bias=False)
        wk, wv: nn.Linear(dim, n_kv_heads * head_dim, bias=False)，head_dim = dim // n_heads
        wo: nn.Linear(dim, dim, bias=False)
        attn_dropout, resid_dropout: nn.Dropout(args.dropout)，分别作用于注意力权重和输出
    """

    def __init__(self, args: ModelArgs, n_kv_heads: int) -> None:
        super().__init__()
        # TODO：args.dim % args.n_heads 或 args.n_heads % n_kv_heads 不为 0 时抛出 ValueError，消息里写出这些数；
        #   保存 n_heads、n_kv_heads、head_dim 和 n_rep = n_heads // n_kv_heads；创建 wq、wk、wv、wo
        #   （wk 和 wv 投影到 n_kv_heads * head_dim 个特征）、attn_dropout、resid_dropout。
        raise NotImplementedError("grouped_query_attention：检查两个整除关系，创建 wq、wk、wv、wo 和两个 dropout")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """因果自注意力：n_heads 个查询头，读 n_kv_heads 个共享的键/值头。

        参数：
            x: (B, T, dim)。
            mask: 可选的额外保留掩码，可广播到 (B, n_heads, T, T)：非零 = 可以关注，
                0 = 被屏蔽；叠加在因果掩码之上（位置 i 只看键 0..i）。

        返回：
            (B, T, dim)。
        """
        # TODO：
        #   1. xq = self.wq(x).view(B, T, n_heads, head_dim).transpose(1, 2)      (B, nh, T, hd)
        #      xk、xv 同样处理，但用 n_kv_heads                                     (B, n_kv, T, hd)
        #   2. 把每个 KV 头紧挨着自己重复 n_rep 次                                  (B, nh, T, hd)
        #   3. scores = xq @ xk.transpose(-2, -1) / sqrt(head_dim)；用 -inf 屏蔽 j > i 和 mask == 0
        #   4. 对键做 softmax，经过 self.attn_dropout，乘以 xv；合并多头              (B, T, dim)
        #   5. return self.resid_dropout(self.wo(merged))
        raise NotImplementedError("grouped_query_attention：投影，重复 KV 头，做因果注意力，合并多头")


def kv_cache_bytes(n_layers: int, batch: int, seq_len: int, n_kv_heads: int, head_dim: int,
                   bytes_per_value: int = 2) -> int:
    """使用分组查询注意力的模型，其 KV 缓存占多少字节。

    参数：
        n_layers: 层数，每层有自己的缓存。
        batch: 同时解码的序列数。
        seq_len: 每个序列缓存的位置数。
        n_kv_heads, head_dim: 键/值头的个数和宽度。
        bytes_per_value: float16 和 bfloat16 为 2，float32 为 4。

    返回：
        一个 int：键和值，对每一层、每个序列、每个位置、每个 KV 头、每个特征都要计数。
    """
    # TODO：数一数缓存了什么：键和值（两个张量），每个形状为 (batch, n_kv_heads, seq_len, head_dim)，每层一份。
    raise NotImplementedError("grouped_query_attention：计算缓存的键和值共占多少字节")
