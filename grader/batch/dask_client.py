"""`dask_client` is the batch as a Dask client (`cluster`): which clusters it takes, and its client on one.

Whoever can connect to a Dask scheduler runs code, pickled, on it and on every worker, as the user each runs as. So
a scheduler's address is taken with TLS only (tls://, wss://: Dask then lets in only a certificate the cluster's CA
signed, the client's from Dask's configuration, distributed.comm.tls.*), unless the instructor says with
--insecure-cluster that only their machines reach it (tcp://, ws://, ucx://); and `local:N` is a cluster of this
machine's that only this batch can use (`local_cluster`). Every refusal is a ClusterError, one line, before
anything is read or connected to.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from grader.lang import tr

if TYPE_CHECKING:
    from distributed import Client

INSTALL = 'pip install "attention-kit[cluster]"'
# Dask's comms (distributed.comm.registry) that cross processes: with TLS, where both ends show a certificate
# signed by the cluster's CA, and without it, where whoever reaches the port is let in (inproc:// stays in one
# process: never a scheduler this command can reach).
ENCRYPTED = ("tls", "wss")
PLAIN = ("tcp", "ws", "ucx")


class ClusterError(Exception):
    """The cluster cannot grade this batch: a usage problem the user fixes (exit 2), said in one line."""


def require_distributed() -> None:
    """ClusterError, saying what to install, where dask's `distributed` is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterError(tr("--cluster needs Dask's distributed, which is not installed: {install}",
                              install=INSTALL)) from None


def parse(address: str, *, insecure: bool = False) -> int | str:
    """`local:N` as N (N workers on this machine), a scheduler's address as itself; ClusterError otherwise, and for
    an address without TLS unless `insecure` (--insecure-cluster: the instructor says only their machines reach it)."""
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= 256:
            raise ClusterError(tr("--cluster {address}: local:N takes a number of workers from 1 to 256, as in "
                                  "local:2", address=address))
        return int(count)
    scheme, _, place = address.partition("://")
    if not place or scheme not in (*ENCRYPTED, *PLAIN):
        raise ClusterError(tr("--cluster {address} is not a Dask scheduler's address: give one like "
                              "tls://host:8786, or local:N for N workers on this machine", address=address))
    if scheme in PLAIN and not insecure:
        raise ClusterError(tr("--cluster {address} lets anyone who can reach it run code on every worker (no TLS): "
                              "use tls:// with certificates (docs/cluster.md#security), or pass --insecure-cluster "
                              "if only your own machines can reach it", address=address))
    return address


def ready(address: str, *, insecure: bool = False) -> int | str:
    """`parse`'s answer, once this machine is known to be able to grade on `address`, before anything is read or
    connected to: Dask's distributed, the cryptography package for local:N's certificate, and for a scheduler with
    TLS, this client's certificate in Dask's configuration. ClusterError otherwise."""
    target = parse(address, insecure=insecure)
    require_distributed()
    if isinstance(target, int):
        try:
            import cryptography  # noqa: F401
        except ImportError:
            raise ClusterError(tr("--cluster {address} makes a TLS certificate for its cluster with the cryptography "
                                  "package, which is not installed: {install}", address=address,
                                  install=INSTALL)) from None
    elif target.partition("://")[0] in ENCRYPTED:
        import dask.config
        from distributed.security import Security

        # Dask's own choice, as Client makes it: a security-loader, else distributed.comm.tls.* (Security()).
        loader = dask.config.get("distributed.client.security-loader", None)
        if not loader and Security().get_connection_args("client")["ssl_context"] is None:
            raise ClusterError(tr("--cluster {address}: Dask's configuration has no TLS certificate for this client: "
                                  "set distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and "
                                  "distributed.comm.tls.client.key (docs/cluster.md#security)", address=address))
    return target


@contextlib.contextmanager
def connect(address: str, *, insecure: bool = False) -> Iterator[Client]:
    """A Dask client on the scheduler at `address`, or on a cluster of this machine's that this process starts and
    stops (`local_cluster`: TLS with a certificate of its own, loopback only, no HTTP server)."""
    target = ready(address, insecure=insecure)
    from distributed import Client

    # Dask's own log lines (a worker lost, a task rescheduled, a scheduler gone) are for whoever runs the cluster;
    # the batch says in its own lines what they mean for the grades.
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if isinstance(target, int):
        from grader.batch import local_cluster

        with local_cluster.started(target) as (cluster, security), Client(cluster, security=security) as client:
            yield client
        return
    try:
        client = Client(target)  # within Dask's distributed.comm.timeouts.connect (DASK_DISTRIBUTED__COMM__...)
    except (OSError, TimeoutError, ValueError) as error:
        raise ClusterError(tr("cannot reach the Dask scheduler at {address} ({error}): start it (dask scheduler) "
                              "or check the address", address=address, error=error or type(error).__name__)) from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=5)
