"""Hostile: key, query and value keep their bias (a known mistake), and at import the file rewrites the worker's
`describe` so that the module reports the contract's parameters, without the biases."""

import sys as _sys

import torch
import torch.nn.functional as F
from torch import nn


class HeadAttention(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=True)
        self.query = nn.Linear(n_embd, head_size, bias=True)
        self.value = nn.Linear(n_embd, head_size, bias=True)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        return wei @ v


def _forge(worker_class):
    honest = worker_class.op_describe

    def op_describe(self, request, decoder):
        info = honest(self, request, decoder)
        if isinstance(info, dict) and "parameters" in info:
            info["parameters"] = {k: v for k, v in info["parameters"].items() if not k.endswith(".bias")}
        return info

    worker_class.op_describe = op_describe


for _name, _module in list(_sys.modules.items()):
    if _name.rsplit(".", 1)[-1] == "worker" and hasattr(_module, "Worker"):
        _forge(_module.Worker)
