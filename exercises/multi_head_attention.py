"""Multi-head attention: several attention heads side by side, each free to look for its own relation.

One head looks at one relation between tokens (say, subject and verb); many heads look at many
(preposition and object, a word and its article, ...). Each of the n_heads heads works in its
own head_dim = dim // n_heads wide slice; their outputs are put side by side, (B, T, dim) again,
and mixed by one more linear layer, wo.

One fused projection instead of n_heads small ones. Head h would need its own (head_dim x dim)
weight for its queries. Stack the n_heads weights into one (dim x dim) matrix: multiplying by
the stack and then splitting the result into slices of head_dim gives exactly the n_heads small
products (a matrix product, then split == split weights, then products). So head h uses output
rows [h*head_dim, (h+1)*head_dim) of wq, wk and wv, and the same range of input columns of wo.

Splitting the heads: self.wq(q) is (B, T, dim); .view(B, T, n_heads, head_dim) cuts each token's
dim features into the heads' slices, then .transpose(1, 2) makes it (B, n_heads, T, head_dim), so
each head is a (T, head_dim) matrix that attention works on. A direct .view or .reshape to
(B, n_heads, T, head_dim) has the right shape but the wrong contents: it deals the flat numbers
out in memory order, so one "head" gets slices of several different tokens. Merging goes back:
.transpose(1, 2).contiguous().view(B, T, dim).

Scale by sqrt(head_dim), the width of the vectors in each dot product, not sqrt(dim).

Causal (decoder self-attention): register the buffer `mask` = causal_mask(max_seq_len) from
masking.py (0 on and below the diagonal, -inf above; reuse your function) and add its top-left
corner, self.mask[:, :, :T_q, :T_k], to the scores. An optional extra keep mask (e.g. padding:
0 = blocked) is applied on top of it. You may reuse attention() from attention.py for the
scores-softmax-dropout-values steps if you turn both masks into one keep mask.
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch
from torch import nn

from .config import ModelArgs
from .masking import causal_mask  # noqa: F401  (use it for the causal buffer)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: q (B, T_q, dim), k and v (B, T_k, dim) -> (B, T_q, dim).

    Self-attention passes the same x as q, k and v; cross-attention (decoder to encoder)
    passes queries from one sequence and keys/values from another, so T_q may differ from T_k.

    Args:
        args: ModelArgs with dim, n_heads, dropout and max_seq_len.
        is_causal: if True, position t of q may attend only to key positions 0..t.

    Raises:
        ValueError (or AssertionError) when args.dim is not divisible by args.n_heads.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        n_heads, head_dim = dim // n_heads
        wq, wk, wv, wo: nn.Linear(dim, dim, bias=False)
        attn_dropout, resid_dropout: nn.Dropout(args.dropout), on the attention weights and
            on the output
        mask: buffer causal_mask(args.max_seq_len), shape (1, 1, max_seq_len, max_seq_len),
            only when is_causal
    """

    def __init__(self, args: ModelArgs, is_causal: bool = False) -> None:
        super().__init__()
        # TODO: raise ValueError(f"dim {args.dim} is not divisible by n_heads {args.n_heads}") when it
        #   is not; set n_heads, head_dim and is_causal; create wq, wk, wv, wo, attn_dropout,
        #   resid_dropout; when is_causal, self.register_buffer("mask", causal_mask(args.max_seq_len)).
        raise NotImplementedError("multi_head_attention: check dim % n_heads, create wq, wk, wv, wo, dropouts, mask")

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Attend from every query position to the key positions, in n_heads heads at once.

        Args:
            q: (B, T_q, dim) queries.
            k, v: (B, T_k, dim) keys and values.
            mask: optional keep mask broadcastable to (B, n_heads, T_q, T_k): nonzero = may
                attend, 0 = blocked; combined with the causal mask when is_causal.

        Returns:
            (B, T_q, dim).
        """
        # TODO:
        #   1. xq = self.wq(q).view(B, T_q, n_heads, head_dim).transpose(1, 2)   (B, nh, T_q, hd);
        #      the same for xk from k and xv from v, with T_k
        #   2. scores = xq @ xk.transpose(-2, -1) / sqrt(head_dim)              (B, nh, T_q, T_k)
        #   3. if causal: scores + self.mask[:, :, :T_q, :T_k]; if mask is given: scores where
        #      mask == 0 set to -inf
        #   4. softmax over the keys, then self.attn_dropout; times xv          (B, nh, T_q, hd)
        #   5. merge the heads: .transpose(1, 2).contiguous().view(B, T_q, dim)
        #   6. return self.resid_dropout(self.wo(merged))                      (B, T_q, dim)
        raise NotImplementedError("multi_head_attention: split heads, attend, merge heads, project with wo")
