"""Isolation: starts as many threads as it can, up to 2000, each sleeping for 30 s.

Grading must still complete, and nothing may outlive it. The message says how many threads started
(`started N threads`). Bounded at 2000 threads of 64 KiB stacks, so that it never harms the host.
"""

import threading
import time

import torch

MAX_THREADS = 2000
_threads = []


def _start_threads():
    threading.stack_size(64 * 1024)
    try:
        for _ in range(MAX_THREADS - len(_threads)):
            thread = threading.Thread(target=time.sleep, args=(30,), daemon=True)
            try:
                thread.start()
            except RuntimeError:  # can't start new thread
                break
            _threads.append(thread)
    finally:
        threading.stack_size(0)


def attention(query, key, value, dropout=None, mask=None):
    _start_threads()
    raise RuntimeError(f"started {len(_threads)} threads")
