"""One head of causal self-attention: each token gathers information from itself and its past.

This is the module of the course lab (nanoGPT's `Head`). Every token of x is projected three
times: a query ("what am I looking for?"), a key ("what do I contain?") and a value ("what I
pass on if chosen"). Token t scores every token s by the dot product query_t . key_s, softmax
turns the scores into weights, and the output for t is the weighted sum of the values:

    out = softmax(mask(q @ k^T / sqrt(head_size))) @ v

One head looks at one kind of relation between tokens; multi_head_attention.py runs several.

Causal: when predicting what follows token t, the model may not peek at tokens after t. The
lab's lower-triangular matrix of ones says who may look at whom (row t has ones in columns
0..t); scores where it is 0 become -inf, so their weights are exactly 0 after the softmax.
Build it once for the longest sequence, block_size, and keep it as a *buffer*
(self.register_buffer): it moves with .to(device) and is saved in state_dict, but it is not a
parameter, so the optimizer never changes it. A batch may be shorter than block_size: use the
top-left (T, T) corner, self.tril[:T, :T].

Scale by sqrt(head_size), the width of q and k where the dot products happen, not by
sqrt(n_embd), the width of x (attention.py explains why we scale at all).
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch
from torch import nn


class HeadAttention(nn.Module):
    """One causal self-attention head: (B, T, n_embd) -> (B, T, head_size).

    Args:
        n_embd: width of each input token.
        head_size: width of the queries, keys, values and of the output.
        block_size: the longest sequence (T) the head accepts; the size of `tril`.
        dropout: probability of zeroing an attention weight while training.

    REQUIRED ATTRIBUTE NAMES (the grader loads weights by these names):
        key, query, value: nn.Linear(n_embd, head_size, bias=False)
        tril: buffer (not a parameter) of shape (block_size, block_size), ones on and below
            the diagonal, zeros above
        dropout: nn.Dropout(dropout)
    """

    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        # TODO: create self.key, self.query, self.value (no bias), register the buffer "tril"
        #   (torch.tril of a (block_size, block_size) matrix of ones) and create self.dropout.
        raise NotImplementedError("head_attention: create key, query, value, the tril buffer and dropout")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend from every position to itself and the positions before it.

        Args:
            x: (B, T, n_embd), with T <= block_size.

        Returns:
            (B, T, head_size): row t is a weighted sum of the values of positions 0..t.
        """
        # TODO:
        #   1. k, q, v = self.key(x), self.query(x), self.value(x)        each (B, T, head_size)
        #   2. scores q @ k.transpose(-2, -1) divided by sqrt(head_size)   (B, T, T)
        #   3. scores where self.tril[:T, :T] == 0 set to -inf             (the future is blocked)
        #   4. softmax over the last dim (the keys), then self.dropout on these weights
        #   5. return weights @ v                                          (B, T, head_size)
        raise NotImplementedError("head_attention: compute causal, scaled attention over the past")
