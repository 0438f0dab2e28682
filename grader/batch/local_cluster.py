"""`local_cluster` starts `--cluster local:N`: a Dask cluster on this machine that only this batch can use.

Whoever can connect to a Dask scheduler, a worker or a nanny runs code there, pickled, as the user it runs as
(root, in the documented set-up). So the cluster speaks Dask's TLS (`Security.temporary()`): a certificate and
key made in memory for this batch, which every connection must present, so a connection from anyone else (another
user of the machine, a submission in a sandbox) is refused before a message is read. Every server listens on the
loopback address only, and none starts an HTTP server: Dask starts one on every scheduler and worker even without
a dashboard (dask/distributed#8136), and it would show the batch's tasks and logs to anyone on the machine.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from distributed import Nanny, Scheduler, SpecCluster, Worker

if TYPE_CHECKING:
    from distributed.security import Security

HOST = "127.0.0.1"


class SchedulerWithoutHTTP(Scheduler):
    """Dask's scheduler, with its comm port only."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        pass


class WorkerWithoutHTTP(Worker):
    """Dask's worker, with its comm port only (a nanny starts it in its own process, by this name)."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        pass


@contextlib.contextmanager
def started(workers: int) -> Iterator[tuple[SpecCluster, Security]]:
    """N single-thread workers (each under a nanny, in its own process) and their scheduler, all on 127.0.0.1,
    speaking TLS with a certificate made for this cluster; stopped when the block ends. Yields the cluster and
    the Security a client needs to connect to it."""
    from distributed.security import Security
    from distributed.system import MEMORY_LIMIT

    security = Security.temporary()
    common = {"host": HOST, "protocol": "tls://", "security": security}
    scheduler = {"cls": SchedulerWithoutHTTP,
                 "options": {**common, "port": 0, "dashboard": False, "dashboard_address": None}}
    # As LocalCluster shares the machine's memory: each worker watches its share (its slots are not counted).
    worker = {"cls": Nanny, "options": {**common, "nthreads": 1, "worker_class": WorkerWithoutHTTP,
                                        "memory_limit": MEMORY_LIMIT // workers, "silence_logs": logging.CRITICAL}}
    with SpecCluster(scheduler=scheduler, workers=dict.fromkeys(range(workers), worker), worker=worker,
                     security=security, silence_logs=logging.CRITICAL) as cluster:
        yield cluster, security
