"""Isolation: forks as many processes as it can, up to 200, each sleeping for 30 s.

A sandbox must bound how many processes a submission runs (a fork bomb would otherwise take the
machine), and must kill them all when the submission is done. The message says how many forks
succeeded (`forked K`). Bounded at 200, so that it never harms the host.
"""

import os
import time

import torch

MAX_FORKS = 200
_forked = []


def _fork_sleepers():
    for _ in range(MAX_FORKS - len(_forked)):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                os.closerange(0, 4096)  # no pipe of the worker's stays open
                time.sleep(30)
            finally:
                os._exit(0)
        _forked.append(pid)


def attention(query, key, value, dropout=None, mask=None):
    _fork_sleepers()
    raise RuntimeError(f"forked {len(_forked)}")
