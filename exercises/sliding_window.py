"""Sliding-window attention: each token attends to the last `window` positions only, and forgets the rest.

Causal attention over T tokens compares every query with every earlier key: T * T / 2 scores, and
a KV cache that grows with every token generated. A sliding window keeps, for query i, only the keys
i - window + 1 .. i (itself and the window - 1 before it): query i sees key j when

    j <= i   and   i - j < window

so the work per token and the cache stay bounded by the window, whatever the length (Mistral 7B
uses a window of 4096). What a window forgets is everything further back: a layer cannot look at
token i - window directly. Stacked layers can still pass information along, window positions per
layer, the way a deep convolutional network sees further than its kernel.

Masks compose by AND. A batch of sequences of different lengths is padded; key_padding (B, T_k)
says which keys are real tokens (True) and which are padding (False). The padding runs along the
keys, so it broadcasts as (B, 1, 1, T_k) against a (T_q, T_k) mask, giving (B, 1, T_q, T_k): the
1 is for the heads.

A query whose every key is blocked (a padding query under a window, say) has a row of -inf scores,
and softmax of that row is 0/0 = NaN, which then spreads into every gradient. Filling with -1e9
instead gives finite but uniform weights, 1/T_k on every blocked key: an average of values the
query was never allowed to see. The right answer for such a row is zeros, with zero gradients.

In the KV cache setting (one token at a time), keys older than the window are never attended to
again, so the cache keeps at most `window` entries and drops the oldest: a rolling buffer.

Shapes: masks (T_q, T_k) or (B, 1, T_q, T_k), bool; q (..., T_q, d), k (..., T_k, d),
v (..., T_k, d_v); the cache's k and v (B, H, T, d), appended along dim 2.
"""

import math  # noqa: F401  (math.sqrt, for the scaling)

import torch


def sliding_window_mask(seq_len: int, window: int) -> torch.Tensor:
    """The causal sliding-window keep mask.

    Args:
        seq_len: T, the number of positions (queries and keys alike).
        window: how many positions each query sees, itself included (window >= 1).

    Returns:
        BoolTensor (T, T): True where key j <= query i and i - j < window.
    """
    # TODO: compare the positions by broadcasting: torch.arange(T) as a column (the queries) and as a row (the keys).
    raise NotImplementedError("sliding_window: build the (T, T) mask of j <= i and i - j < window")


def combine_masks(keep: torch.Tensor, key_padding: torch.Tensor) -> torch.Tensor:
    """A (T_q, T_k) keep mask and a padding mask of the keys, in one mask.

    Args:
        keep: (T_q, T_k), True = may attend (e.g. sliding_window_mask).
        key_padding: (B, T_k), True = a real token, False = padding.

    Returns:
        BoolTensor (B, 1, T_q, T_k): True where both keep, on key_padding's device.
    """
    # TODO: keep as (1, 1, T_q, T_k) and the padding as (B, 1, 1, T_k): the padding runs along the keys. Then AND.
    raise NotImplementedError("sliding_window: combine the keep mask and the key padding into (B, 1, T_q, T_k)")


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention under a keep mask, safe for queries that see no key at all.

    Args:
        q: (..., T_q, d); k: (..., T_k, d); v: (..., T_k, d_v).
        keep: keep mask broadcastable to (..., T_q, T_k): nonzero = may attend, 0 = blocked.

    Returns:
        (..., T_q, d_v), softmax(q k^T / sqrt(d)) v over the kept keys; a query with no kept key gets
        zeros (never NaN), and its gradients are finite (zero).
    """
    # TODO:
    #   1. scores = q @ k.transpose(-2, -1) / sqrt(d), blocked ones set to -inf
    #   2. find the rows with no kept key (keep.any(dim=-1, keepdim=True) is False) and keep them from the 0/0
    #      of softmax: give them finite scores, then set their weights to 0
    #   3. return weights @ v
    raise NotImplementedError("sliding_window: masked softmax attention, with zeros for rows that see no key")


class RollingKVCache:
    """A KV cache that holds the keys and values of the last `window` positions only.

    Args:
        window: the most positions it keeps.

    Attribute names are yours to choose.
    """

    def __init__(self, window: int) -> None:
        # TODO: keep the window; nothing is cached yet.
        raise NotImplementedError("sliding_window: remember the window, start with an empty cache")

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values and return what a query may attend to now.

        Args:
            k, v: (B, H, T_new, d), the newest positions, oldest first.

        Returns:
            (k, v), each (B, H, min(window, seen), d): the last min(window, seen) positions seen, oldest first.
        """
        # TODO: append along dim 2 (torch.cat), keep only the last `window` positions, return them.
        raise NotImplementedError("sliding_window: append, keep the last window positions, return them")
