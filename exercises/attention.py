"""Scaled dot-product attention: every query takes a weighted average of the values.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Each query is compared with every key by a dot product; softmax over the keys turns one
query's scores into weights that are >= 0 and sum to 1; the output for that query is the
same weighted sum of the value vectors. Q and K must share their width d_k so the dot
products exist; V may have another width d_v, which is the width of the output.

Why divide by sqrt(d_k)? If the d_k components of a query and a key are independent with
mean 0 and variance 1, their dot product is a sum of d_k such products, so its variance
is d_k: at d_k = 512 the scores spread with a standard deviation of about 23. Softmax of
numbers that far apart is almost one-hot, a saturated region where its gradient is close
to 0, so learning stalls. Dividing by sqrt(d_k) brings the variance back to 1 at any width.
"""

import math  # noqa: F401  (math.sqrt, for the scaling)
from collections.abc import Callable

import torch


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend from each query to all keys and return the mixed values and the weights.

    `...` is any number of leading dims (batch, heads, ...), the same for all inputs.

    Args:
        query: (..., L_q, d_k), one row per query position.
        key: (..., L_k, d_k), one row per key position.
        value: (..., L_k, d_v), the vector carried by each key position.
        dropout: optional module or callable (e.g. nn.Dropout) applied to the weights.
        mask: optional keep mask broadcastable to (..., L_q, L_k): True / nonzero means
            "this query may attend to this key", False / 0 means blocked. Set blocked
            scores to -inf (or a very negative number) BEFORE the softmax, so their
            weights come out exactly 0 and every row still sums to 1; zeroing weights
            after the softmax is too late.

    Returns:
        output: (..., L_q, d_v), equal to p_attn @ value.
        p_attn: (..., L_q, L_k), the weights after dropout (the ones used for output).
            Softmax runs over the last dim, the keys: each query's row sums to 1.
    """
    # TODO: in the dtype and on the device of the inputs,
    #   1. scores (..., L_q, L_k): query times key transposed in its last two dims only
    #      (key.transpose(-2, -1), so leading dims stay put), divided by sqrt(d_k);
    #   2. blocked scores (mask == 0) set to -inf;
    #   3. p_attn: softmax over the keys, then dropout when given;
    #   4. return p_attn @ value and p_attn.
    raise NotImplementedError("attention: compute softmax(Q K^T / sqrt(d_k)) V and return (output, p_attn)")
