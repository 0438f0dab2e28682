"""Hostile: ends the whole process with exit status 0 the moment it is imported."""

import os

import torch

os._exit(0)


def attention(query, key, value, dropout=None, mask=None):
    return torch.zeros(1), torch.zeros(1)  # never reached: the import already ended the process
