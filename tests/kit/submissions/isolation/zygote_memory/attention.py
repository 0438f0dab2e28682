"""Isolation: reaches into the zygote (the worker's parent): its memory, its environment, its file descriptors.

The zygote forks every later worker, the next submission's included: whoever can read or write its
memory, trace it or steal its sockets owns the sandbox. Nothing is written to the zygote; the
message lists every way in that opened (`opened=[...]`), so an empty list means the sandbox held.
"""

import ctypes
import os

import torch

PTRACE_SEIZE = 0x4206
SYS_PIDFD_OPEN = 434  # the same number on every architecture
SYS_PIDFD_GETFD = 438


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _readable_address(pid):
    """The start of a readable mapping of `pid`, or None when its maps cannot be read."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                span, perms = line.split()[:2]
                if perms.startswith("r"):
                    return int(span.split("-")[0], 16)
    except (OSError, ValueError):
        pass
    return None


def _attack(target):
    libc = ctypes.CDLL(None, use_errno=True)
    opened = []
    address = _readable_address(target)
    if address is not None:
        opened.append("maps")
    try:
        with open(f"/proc/{target}/mem", "rb", buffering=0) as mem:
            opened.append("mem-open-read")
            if address is not None:
                mem.seek(address)
                if mem.read(16):
                    opened.append("mem-read")
    except (OSError, ValueError, OverflowError):
        pass
    try:
        os.close(os.open(f"/proc/{target}/mem", os.O_RDWR))  # opened only: nothing is written
        opened.append("mem-open-write")
    except OSError:
        pass
    try:
        with open(f"/proc/{target}/environ", "rb") as environ:
            environ.read()
        opened.append("environ")
    except OSError:
        pass
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    # SEIZE rather than ATTACH: it does not stop the zygote; the kernel detaches us when we exit.
    if libc.ptrace(PTRACE_SEIZE, target, None, None) == 0:
        opened.append("ptrace")
    if address is not None:
        buffer = ctypes.create_string_buffer(16)
        local = _IOVec(ctypes.cast(buffer, ctypes.c_void_p), 16)
        remote = _IOVec(address, 16)
        libc.process_vm_readv.restype = ctypes.c_ssize_t
        if libc.process_vm_readv(target, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
            opened.append("process_vm_readv")
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(SYS_PIDFD_OPEN, target, 0)
    if pidfd >= 0:
        for fd in range(64):
            stolen = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
            if stolen >= 0:
                os.close(stolen)
                opened.append(f"pidfd_getfd({fd})")
                break
        os.close(pidfd)
    return opened


def attention(query, key, value, dropout=None, mask=None):
    opened = _attack(os.getppid())
    raise RuntimeError(f"opened={opened}")
