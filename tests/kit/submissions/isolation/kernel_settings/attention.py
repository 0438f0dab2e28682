"""Isolation: opens the kernel's own settings for writing, through the sandbox's /proc.

Where the sandbox's uid is root outside (bubblewrap started by root maps it so), the kernel lets it
write root-owned /proc files whose only check is the owner: sysctls, even the magic SysRq trigger.
Nothing is ever written; the message lists what opened for writing (`writable=[...]`).
"""

import os

import torch

TARGETS = ("/proc/sys/kernel/printk_ratelimit_burst", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
           "/proc/sysrq-trigger")


def attention(query, key, value, dropout=None, mask=None):
    writable = []
    for path in TARGETS:
        try:
            os.close(os.open(path, os.O_WRONLY))  # opened only: nothing is written
            writable.append(path)
        except OSError:
            pass
    message = "writable=[" + ", ".join(writable) + "]"  # not in the raise line, which the report quotes
    raise RuntimeError(message)
