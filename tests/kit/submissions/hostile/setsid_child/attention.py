"""Hostile: leaves detached processes behind (a new-session child and a double-forked grandchild)."""

import os
import subprocess
import sys

import torch

MARKER = "KIT_HOSTILE_MARKER"
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)", MARKER]


def _double_fork_sleeper() -> None:
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, SLEEPER)
    finally:
        os._exit(0)


def attention(query, key, value, dropout=None, mask=None):
    subprocess.Popen(
        SLEEPER, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    _double_fork_sleeper()
    # Not attention: a shape no test expects, so without its attack this file scores 0.
    return torch.zeros(1), torch.zeros(1)
