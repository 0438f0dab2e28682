"""Isolation: opens network connections: the internet, the host's loopback, the host's Unix sockets.

The test that copies this file sets TCP_PORT to a port it listens on at 127.0.0.1, next to an abstract
Unix socket "\0kit-isolation-<port>" and a Unix socket file /tmp/kit-isolation-<port>.sock, and checks
that no connection reached them. The message lists what connected (`connected=[...]`).
"""

import socket

import torch

TCP_PORT = 0  # set by tests/kit/test_isolation.py in its copy of this file
TIMEOUT_S = 2.0


def _connect(family, address, kind=socket.SOCK_STREAM):
    try:
        with socket.socket(family, kind) as sock:
            sock.settimeout(TIMEOUT_S)
            sock.connect(address)
        return True
    except OSError:
        return False


def _attack():
    targets = {
        "internet-ipv4": (socket.AF_INET, ("1.1.1.1", 53)),
        "internet-ipv6": (socket.AF_INET6, ("2606:4700:4700::1111", 53)),
        "x11-abstract": (socket.AF_UNIX, "\0/tmp/.X11-unix/X0"),
    }
    if TCP_PORT:
        targets.update({
            "host-loopback": (socket.AF_INET, ("127.0.0.1", TCP_PORT)),
            "host-abstract": (socket.AF_UNIX, f"\0kit-isolation-{TCP_PORT}"),
            "host-socket-file": (socket.AF_UNIX, f"/tmp/kit-isolation-{TCP_PORT}.sock"),
        })
    return [name for name, (family, address) in targets.items() if _connect(family, address)]


def attention(query, key, value, dropout=None, mask=None):
    raise RuntimeError(f"connected={_attack()}")
