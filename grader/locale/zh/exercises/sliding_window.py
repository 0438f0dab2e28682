"""滑动窗口注意力：每个 token 只关注最近 `window` 个位置，更早的都忘掉。

对 T 个 token 做因果注意力，要把每个查询和它之前的每个键比较：T * T / 2 个分数，而且
KV 缓存随生成的每个 token 增长。滑动窗口只为查询 i 保留键 i - window + 1 .. i
（它自己和它之前的 window - 1 个位置）：当

    j <= i   且   i - j < window

时，查询 i 能看键 j。于是不论序列多长，每个 token 的计算量和缓存都以窗口为上界
（Mistral 7B 的窗口是 4096）。窗口忘掉的是更远的一切：一层注意力不能直接看 token i - window。
多层叠起来仍能把信息传下去，每层传 window 个位置，就像深层卷积网络看得比卷积核更远。

掩码用 AND 组合。一个批次里长短不一的序列要填充；key_padding (B, T_k) 说明哪些键是真实的
token（True），哪些是填充（False）。填充是沿着键的方向的，所以它以 (B, 1, 1, T_k) 的形状
和 (T_q, T_k) 的掩码广播，得到 (B, 1, T_q, T_k)：那个 1 留给多头。

如果一个查询的所有键都被屏蔽（比如窗口里只有填充的查询），它的分数是一整行 -inf，
softmax 的结果是 0/0 = NaN，还会扩散到所有梯度里。改用 -1e9 填充，权重虽然有限，
却是均匀的，每个被屏蔽的键都得到 1/T_k：这是对它本不能看的值取平均。这样的行
正确的答案是全零，梯度也为零。

在 KV 缓存的场景里（一次一个 token），比窗口更旧的键再也不会被关注，所以缓存最多保存
`window` 个位置，丢掉最旧的：一个滚动缓冲区。

形状：掩码 (T_q, T_k) 或 (B, 1, T_q, T_k)，bool；q (..., T_q, d)，k (..., T_k, d)，
v (..., T_k, d_v)；缓存的 k 和 v 是 (B, H, T, d)，沿 dim 2 追加。
"""

import math  # noqa: F401  (缩放时要用 math.sqrt)

import torch


def sliding_window_mask(seq_len: int, window: int) -> torch.Tensor:
    """因果的滑动窗口保留掩码。

    参数：
        seq_len: T，位置的个数（查询和键都是）。
        window: 每个查询能看的位置数，包括它自己（window >= 1）。

    返回：
        BoolTensor (T, T)：键 j <= 查询 i 且 i - j < window 处为 True。
    """
    # TODO：用广播比较位置：torch.arange(T) 作为一列（查询）和一行（键）。
    raise NotImplementedError("sliding_window：构造 j <= i 且 i - j < window 的 (T, T) 掩码")


def combine_masks(keep: torch.Tensor, key_padding: torch.Tensor) -> torch.Tensor:
    """把一个 (T_q, T_k) 保留掩码和键的填充掩码合成一个掩码。

    参数：
        keep: (T_q, T_k)，True = 可以关注（例如 sliding_window_mask）。
        key_padding: (B, T_k)，True = 真实的 token，False = 填充。

    返回：
        BoolTensor (B, 1, T_q, T_k)：两者都保留处为 True，位于 key_padding 所在的设备上。
    """
    # TODO：keep 变成 (1, 1, T_q, T_k)，填充变成 (B, 1, 1, T_k)：填充沿着键的方向。然后做 AND。
    raise NotImplementedError("sliding_window：把保留掩码和键的填充合成 (B, 1, T_q, T_k)")


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """带保留掩码的缩放点积注意力，一个键都看不到的查询也不会出错。

    参数：
        q: (..., T_q, d)；k: (..., T_k, d)；v: (..., T_k, d_v)。
        keep: 可广播到 (..., T_q, T_k) 的保留掩码：非零 = 可以关注，0 = 被屏蔽。

    返回：
        (..., T_q, d_v)，在保留的键上计算 softmax(q k^T / sqrt(d)) v；没有可用键的查询输出全零
        （绝不是 NaN），它的梯度有限（为零）。
    """
    # TODO：
    #   1. scores = q @ k.transpose(-2, -1) / sqrt(d)，被屏蔽的设为 -inf
    #   2. 找出没有可用键的行（keep.any(dim=-1, keepdim=True) 为 False），别让它们落进 softmax 的 0/0：
    #      先给它们有限的分数，再把它们的权重设为 0
    #   3. return weights @ v
    raise NotImplementedError("sliding_window：带掩码的 softmax 注意力，看不到键的行输出全零")


class RollingKVCache:
    """只保存最近 `window` 个位置的键和值的 KV 缓存。

    参数：
        window: 最多保存的位置数。

    属性名由你决定。
    """

    def __init__(self, window: int) -> None:
        # TODO：记住窗口大小；一开始什么都没有缓存。
        raise NotImplementedError("sliding_window：记住窗口大小，从空缓存开始")

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """追加新的键和值，返回查询现在可以关注的部分。

        参数：
            k, v: (B, H, T_new, d)，最新的位置，旧的在前。

        返回：
            (k, v)，每个形状为 (B, H, min(window, seen), d)：见过的最后 min(window, seen) 个位置，旧的在前。
        """
        # TODO：沿 dim 2 追加（torch.cat），只保留最后 `window` 个位置，返回它们。
        raise NotImplementedError("sliding_window：追加，保留最后 window 个位置，返回它们")
