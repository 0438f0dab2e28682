"""各个练习共用的模型超参数（已完整提供，不计分）。"""

from dataclasses import dataclass


@dataclass
class ModelArgs:
    """一个 Transformer 块的尺寸：模型宽度、头数、dropout 和最长序列长度。"""

    dim: int = 512  # 模型宽度 d_model；平均分给各个头
    n_heads: int = 8
    dropout: float = 0.0
    max_seq_len: int = 512  # 预先计算的因果掩码的大小

    @property
    def n_embd(self) -> int:
        """模型宽度在 nanoGPT 里的名字；和 `dim` 是同一个数。"""
        return self.dim
