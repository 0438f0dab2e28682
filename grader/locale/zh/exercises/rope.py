"""旋转位置编码（RoPE）：旋转查询和键，让注意力分数只看到距离。

positional_encoding.py 的正弦位置编码是在网络底部、一次性*加*到嵌入上的。RoPE（RoFormer，
2021 年；llama、Mistral、Qwen 等都在用）则不同：在每一层、就在计算分数之前，把每个查询和键
*转*一个角度，这个角度随它的位置增长。

把一个头的 head_dim 个特征切成 head_dim / 2 对：第 i 对是特征 (2i, 2i+1)，即平面上的一个点。
在位置 p，第 i 对旋转的角度是

    angle[p, i] = p * base^(-2i / head_dim)      (base = 10000)

    out[2i]   = x[2i] * cos(angle) - x[2i+1] * sin(angle)
    out[2i+1] = x[2i] * sin(angle) + x[2i+1] * cos(angle)

第 0 对每个位置转一弧度；越往后的对转得越慢（频率和正弦位置编码的相同），所以转得快的对
区分相近的位置，转得慢的对区分相距很远的位置。

为什么分数变成了相对的？旋转不改变长度；两个向量分别旋转角度 a 和 b 之后的点积，等于把原来
的两个向量之一旋转 b - a 之后的点积。一对一对地看，位置 m 的查询和位置 n 的键的分数是

    q_rot(m) . k_rot(n) = sum_i  rotate(q_i, m * f_i) . rotate(k_i, n * f_i)
                        = sum_i  q_i . rotate(k_i, (n - m) * f_i)

它只取决于 m - n：把两个位置平移同样的距离，每个分数都不变。值里不加入任何东西，位置 0 就是
恒等变换（cos 0 = 1，sin 0 = 0）。

配对方式是一种约定，本工具包用 RoFormer 和 Meta 的 llama 的约定：*相邻*的特征 (2i, 2i+1)
配成一对（相邻配对，"interleaved"）。Hugging Face 的 llama 用 `rotate_half`，把特征 i 和特征
i + head_dim / 2 配成一对（前后两半配对）；它的分数同样是相对的，但转的是另一些数，所以用一种
约定训练出来的模型，换成另一种就坏了（两边的检查点要重排 wq 和 wk 才能互相转换）。
Meta 的代码用复数写同一个旋转：把第 i 对看作 x[2i] + j x[2i+1]，乘以
e^(j angle) = cos(angle) + j sin(angle)（torch.view_as_complex、torch.polar）；这就是上面的
公式，这样写在这里也可以。

角度永远不变，所以把 cos 和 sin 算一次，做成 float32 的表 (max_seq_len, head_dim // 2)，
在 RotaryEmbedding 里存为缓冲区：缓冲区会跟着模块经过 .to(device)，也会保存在 state_dict 里，
普通属性两样都做不到。因为表是 float32，float64 的输入也只按 float32 的精度旋转；输出保持
输入的 dtype。

形状：x (..., T, head_dim)，前导维度任意：在注意力里是 (B, n_heads, T, head_dim)。positions
是可选的 LongTensor (T,)，存放绝对位置（默认 0..T-1），这正是 KV 缓存需要的：一个解码步里的
token 排在已经见过的 token 之后。
"""

import torch
from torch import nn


def rope_tables(head_dim: int, max_seq_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE 要转的每个角度的 cos 和 sin。

    参数：
        head_dim: 每个头的特征数（偶数）。
        max_seq_len: 表中的位置个数。
        base: 频率的底数，默认 10000。

    返回：
        (cos, sin)，形状都是 (max_seq_len, head_dim // 2)，float32，其中
        angle[p, i] = p * base^(-2i / head_dim)，p = 0 .. max_seq_len-1，i = 0 .. head_dim/2 - 1。
    """
    # TODO：频率 base^(-2i / head_dim)，2i = 0, 2, ..., head_dim - 2（torch.arange(0, head_dim, 2)），
    #   位置 0..max_seq_len-1，两者的外积（即角度），再取它的 cos 和 sin，都用 float32。
    raise NotImplementedError("rope：计算角度 p * base^(-2i/head_dim)，返回它们的 cos 和 sin")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor | None = None) -> torch.Tensor:
    """把 x 的每一对特征 (2i, 2i+1) 旋转它所在 token 的位置对应的角度。

    参数：
        x: (..., T, head_dim)，前导维度任意，float32 或 float64。
        cos, sin: rope_tables 算出的表，(max_seq_len, head_dim // 2)。
        positions: 可选的 LongTensor (T,)，存放绝对位置；默认 0..T-1。

    返回：
        (..., T, head_dim)，dtype 与 x 相同：out[2i] = x[2i] cos - x[2i+1] sin，out[2i+1] = x[2i] sin + x[2i+1] cos。
    """
    # TODO：取出 cos 和 sin 中这些位置的行 (T, head_dim/2)；把 x 分成偶数特征和奇数特征
    #   （x[..., 0::2]、x[..., 1::2]）；旋转；再把每一对放回原位（相邻配对，不是前后两半）。
    raise NotImplementedError("rope：把每一对 (x[2i], x[2i+1]) 旋转它们所在位置的角度")


class RotaryEmbedding(nn.Module):
    """按位置旋转查询和键，表只算一次。

    参数：
        head_dim: 每个头的特征数（偶数）。
        max_seq_len: 最长的序列（表的行数）。
        base: 频率的底数，默认 10000。

    属性（评分器会找这些名字）：
        cos, sin: 缓冲区 (max_seq_len, head_dim // 2)，float32，由 rope_tables 算出。
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0) -> None:
        super().__init__()
        # TODO：cos, sin = rope_tables(...)；用 self.register_buffer 把两者都注册为缓冲区。
        raise NotImplementedError("rope：把 cos 表和 sin 表注册为缓冲区")

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """用同样的方式旋转查询和键。

        参数：
            q: (..., T, head_dim) 查询；k: (..., T, head_dim) 键（两者的前导维度可以不同）。
            positions: 可选的 LongTensor (T,)，存放绝对位置；默认 0..T-1。

        返回：
            旋转后的 (q, k)，各自保持自己的形状和 dtype。
        """
        # TODO：用这个模块的表和同一组 positions，对 q 和 k 分别调用 apply_rope。
        raise NotImplementedError("rope：返回 apply_rope(q, ...), apply_rope(k, ...)")
