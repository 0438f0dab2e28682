"""Correct attention that, on its first call, makes the worker's Encoder send {"$dtype": [1]} as its answer.

A list where a dtype name belongs: a trusted Decoder that looks it up unchecked raises TypeError
(unhashable) instead of refusing the message.
"""

import math
import os
import sys
import tempfile

import torch


def _first_call_in_this_sandbox():
    try:
        os.close(os.open(os.path.join(tempfile.gettempdir(), "forgery-bad-dtype"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _sabotage_the_encoder():
    frame = sys._getframe()
    while frame is not None and not (frame.f_code.co_name == "handle" and "encoder" in frame.f_locals):
        frame = frame.f_back
    encoder_class = type(frame.f_locals["encoder"])
    honest = encoder_class.encode

    def encode(self, value, depth=0):
        encoder_class.encode = honest  # once only
        return {"$dtype": [1]}

    encoder_class.encode = encode


def attention(query, key, value, dropout=None, mask=None):
    if _first_call_in_this_sandbox():
        _sabotage_the_encoder()
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return torch.matmul(weights, value), weights
