"""一个小小的 GPT：把这条路线的各个部分组成一个只有解码器的模型，并用 KV 缓存做贪心生成。

    idx (B, T) -> tok_embed -> [block] x n_layers -> norm -> head -> logits (B, T, vocab)
    block:  x = x + attention(norm(x))       分组查询、RoPE、因果、带缓存
            x = x + feed_forward(norm(x))

前置归一化（pre-norm）：每个子层读取残差流经过归一化的一份副本，再把自己的输出加回残差流；残差流本身
从不被归一化，直到 head 之前最后那个 `norm`。梯度于是能沿着残差流原封不动地往下传，这就是 llama、
GPT-2 以及此后的每个模型都这样训练深层堆叠的原因。

这里没有位置编码表：RoPE 在注意力内部按位置旋转每个查询和键，所以一个分数取决于两个 token
相距多远。这对这个模型必须学会的东西很重要。评分器用这样的行训练它：`7 2 9 4 7 2 9 4 7 ...`
（几个不同的 token 循环重复，每一行的周期都不同）：要预测第二个 `7` 后面是什么，模型必须找到
前面那个 `7`，把它后面的 token 抄过来。这就是归纳头（induction head），两层里的两个头：一个把
“我前面的 token 是 7”写进每个位置（这是相对位置的活，归 RoPE 管），另一个去找这条记录，把那里的
token 抄过来。

缓存：已经见过的位置，它们在注意力里的键和值永远不会变（因果注意力：过去看不到未来）。所以
generate 先对提示（prompt）运行一次，保存每一层的键（RoPE 之后）和值，之后每次调用只输入
**一个**新 token：它占据位置 T_past .. T_past + T - 1，关注缓存的键和它自己的键，再把它的键和值追加到
缓存里。得到的 logits 和对整个序列调用一次完全相同，工作量却只是它的一小部分。有了分组查询注意力，
缓存每层保存 n_kv_heads 个头，而不是 n_heads 个：分组省下的正是这部分内存。
"""

import math  # noqa: F401  (计算分数的缩放时要用 math.sqrt)

import torch
from torch import nn

from .rope import RotaryEmbedding  # noqa: F401


class TinyGPT(nn.Module):
    """只有解码器的语言模型：token id 组成的 idx (B, T) -> 每个位置之后那个 token 的 logits (B, T, vocab)，以及缓存。

    参数：
        vocab: token 的个数（词表大小）。
        dim: 残差流的宽度；head_dim = dim // n_heads。
        n_heads, n_kv_heads: 查询头和键/值头的个数（n_heads % n_kv_heads == 0）；第 h 个查询头读
            第 h // (n_heads // n_kv_heads) 个键/值头。
        n_layers: 块的个数。
        max_seq_len: 最长的序列（RoPE 的表）。

    必须使用的属性名（每一层内部的名字由你决定）：
        tok_embed: nn.Embedding(vocab, dim)
        layers: n_layers 个前置归一化块组成的 nn.ModuleList（先是注意力，其中 wk, wv = nn.Linear(dim, n_kv_heads *
            head_dim, bias=False)，并带 RoPE；然后是前馈网络，例如 llama 的 SwiGLU）
        norm: 最后的归一化（nn.RMSNorm(dim) 或 nn.LayerNorm(dim)）
        head: nn.Linear(dim, vocab, bias=False)（它可以和 tok_embed 共享权重，nanoGPT 就是这样做的）
    """

    def __init__(self, vocab: int, dim: int = 64, n_heads: int = 4, n_kv_heads: int = 2, n_layers: int = 2,
                 max_seq_len: int = 128) -> None:
        super().__init__()
        # TODO：tok_embed、layers（用你自己写的块类）、norm、head。
        raise NotImplementedError("tiny_gpt：创建 tok_embed、layers、norm 和 head")

    def forward(self, idx: torch.Tensor, cache: object = None) -> tuple[torch.Tensor, object]:
        """idx (B, T) -> (logits (B, T, vocab), 缓存)。

        cache: None（这些 token 从位置 0 开始），或上一次调用返回的缓存；它的结构由你决定，
            例如一个列表，每层一对 (k, v)，每个形状为 (B, n_kv_heads, T_seen, head_dim)，键是 RoPE 之后的。
        """
        # TODO：x = tok_embed(idx)；每一层接收 x 和缓存中属于它的那部分，返回两者；然后
        #   head(norm(x))。返回原始的 logits，不做 softmax。
        raise NotImplementedError("tiny_gpt：forward 计算 head(norm(layers(tok_embed(idx))))")


def generate(model: TinyGPT, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """贪心生成：idx (B, T) -> (B, T + max_new_tokens)，先是提示，后是新生成的 token。

    先对提示运行一次模型；之后每一步取最后那个位置的 logits 在词表上的 argmax，追加到序列后面，
    再用这一个 token (B, 1) 和缓存调用 model(next_token, cache)。
    """
    # TODO：logits, cache = model(idx)；然后重复 max_new_tokens 次：next_token = logits[:, -1].argmax(dim=-1,
    #   keepdim=True)，追加它，再 logits, cache = model(next_token, cache)。
    raise NotImplementedError("tiny_gpt：生成，提示只运行一次，之后每次调用只给一个 token 和缓存")
