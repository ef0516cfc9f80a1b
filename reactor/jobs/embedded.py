"""Embedded workers: in-process :class:`~reactor.jobs.worker.Worker` threads for ``local://``.

``local://`` is an in-process queue with worker threads, the embedded default (README.md, "Choosing
a backend"): with the default ``memory://`` + ``local://`` and no ``reactor worker`` process,
``Background(...)`` runs and fan-out maps must still run. :func:`bind_local_workers` (called by
:func:`reactor.configure` for a router it built from a URL, never for a router object the caller
passed nor for ``router_from_url`` alone) attaches ``workers`` handler threads (URL option of
``local://``, default 2) to any router that declares
:class:`~reactor.ports.capabilities.HostsEmbeddedWorkers`; they start on the first enqueue and
stop when the router is closed (``config.reset()`` or a reconfigure). ``local://?workers=0``
keeps a bare queue for tests that drive jobs by hand (``Worker.run_pending``).
"""

from __future__ import annotations

import threading

from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.model.text import escaping_logger
from reactor.ports.capabilities import HostsEmbeddedWorkers

__all__ = ["EMBEDDED_DRAIN_TIMEOUT", "EMBEDDED_POLL_SECONDS", "bind_local_workers"]

log = escaping_logger("reactor.worker")

#: Seconds an embedded worker thread blocks in ``receive`` before re-checking stop (the router
#: wakes it at once when it is stopped).
EMBEDDED_POLL_SECONDS = 1.0

#: Seconds ``config.reset()`` waits for the embedded workers' jobs in flight.
EMBEDDED_DRAIN_TIMEOUT = 5.0


class _Embedded:
    """The lazily started worker of one router (the start/stop pair given to the router)."""

    def __init__(self, runtime: Runtime, threads: int) -> None:
        self.runtime = runtime
        self.threads = threads
        self.worker: Worker | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self.worker is not None:
                return
            self.worker = Worker(
                self.runtime, threads=self.threads, poll_seconds=EMBEDDED_POLL_SECONDS,
                drain_timeout=EMBEDDED_DRAIN_TIMEOUT,
            )
            self.worker.start()
        log.info("event=embedded_workers_started threads=%d", self.threads)

    def stop(self) -> None:
        with self._lock:
            worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop()


def bind_local_workers(runtime: Runtime) -> bool:
    """Attach lazily started in-process workers to ``runtime.router`` if it hosts embedded
    workers (:class:`~reactor.ports.capabilities.HostsEmbeddedWorkers`, e.g. ``local://``) and
    asks for ``workers > 0``.

    Args:
        runtime: the runtime :func:`reactor.configure` just built (its router came from a URL).

    Returns:
        ``True`` when workers were attached (they start with the first enqueue).
    """
    router = runtime.router
    if not isinstance(router, HostsEmbeddedWorkers) or router.workers <= 0:
        return False
    embedded = _Embedded(runtime, router.workers)
    router.attach_consumers(embedded.start, embedded.stop)
    return True
