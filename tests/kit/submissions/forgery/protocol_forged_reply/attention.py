"""Correct attention that, on its first call, writes a forged reply ahead of the worker's real one.

The forgery echoes the request's id (read from the worker's own frames) and carries the right answer,
so it is as plausible as a reply can be; the worker's real reply follows it into the pipe, where a
trusted side that does not check ids would take it as the answer to the next request.
"""

import math
import os
import sys
import tempfile

import torch


def _frame_local(function, name):
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == function and name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise RuntimeError(f"no {function}() frame with {name!r}")


def _first_call_in_this_sandbox():
    try:
        os.close(os.open(os.path.join(tempfile.gettempdir(), "forgery-forged-reply"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _attention(query, key, value, dropout, mask):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return torch.matmul(weights, value), weights


def attention(query, key, value, dropout=None, mask=None):
    result = _attention(query, key, value, dropout, mask)
    if _first_call_in_this_sandbox():
        worker = _frame_local("handle", "self")
        request = _frame_local("handle", "request")
        encoder = worker.protocol.Encoder(worker._handle_of)
        header = {"ok": True, "value": encoder.encode(result)}
        if "id" in request:
            header["id"] = request["id"]
        worker.protocol.write_message(_frame_local("serve", "fd_out"), header, encoder.tensors)
    return result
