"""A delivered job's visibility lease while a worker runs it (docs/workers.md, "Delivery and
visibility"; docs/concepts.md, "Heartbeats").

While a handler runs, the job's delivery stays invisible to other receivers: the worker
renews it every third of its lease from the shared heartbeat scheduler
(:class:`reactor.coordination.heartbeat.Heartbeat`; docs/coordination.md, "Renewal and
loss"). A step declared ``Timeouts(heartbeat=h)`` shortens the lease to ``h`` while its
attempt runs (:meth:`VisibilityLease.at_most`), so the job of a worker that died mid-step
comes back to another worker within about ``h`` instead of a whole visibility timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from reactor.coordination.heartbeat import Heartbeat
from reactor.ports.router import Delivery, Router

__all__ = ["VisibilityLease"]

log = logging.getLogger("reactor.worker")


class VisibilityLease:
    """Keeps one delivery invisible while its job runs, renewing it every third of the lease.

    Args:
        router: the router the delivery came from.
        delivery: the delivery being handled.
        seconds: the lease length, in seconds (the worker's ``visibility``).

    Thread-safety: :meth:`start`, :meth:`stop` and :meth:`at_most` may be called from
    different threads (the worker's and the run's executor thread); one lock orders them.
    """

    def __init__(self, router: Router, delivery: Delivery, seconds: float) -> None:
        self.router = router
        self.delivery = delivery
        self.seconds = float(seconds)
        self._lock = threading.Lock()
        self._heartbeat: Heartbeat | None = None
        self._stopped = False

    def start(self, started: float | None = None) -> VisibilityLease:
        """Start renewing the lease (``started``: when the delivery was received, on
        ``time.monotonic``; default now). Returns ``self``."""
        with self._lock:
            self._begin(self.seconds, time.monotonic() if started is None else started)
        return self

    def stop(self) -> None:
        """Stop renewing (the job is acked, retried or dead-lettered next). Idempotent."""
        with self._lock:
            self._stopped = True
            self._end()

    @contextmanager
    def at_most(self, seconds: float) -> Iterator[None]:
        """Hold the delivery with leases of ``min(seconds, lease)`` in the scope: the remaining
        visibility is set to it at once and renewed every third of it; the worker's lease is
        restored (and set again at once) when the scope ends.

        Args:
            seconds: the shorter lease, in seconds (> 0; the caller bounds it below).

        A failed change is logged (``event=visibility_change_failed``) and the renewal goes on
        with the lease it had; it never raises.
        """
        if not seconds < self.seconds:
            yield
            return
        self._change(seconds)
        try:
            yield
        finally:
            self._change(self.seconds)

    # -- internals --------------------------------------------------------------------------

    def _change(self, seconds: float) -> None:
        with self._lock:
            if self._stopped:
                return
            self._end()
            started = time.monotonic()
            try:
                self.router.extend(self.delivery, seconds)
            except Exception as exc:  # the renewal goes on and retries
                log.warning("event=visibility_change_failed job_id=%s seconds=%.2f error=%s",
                            self.delivery.job.id, seconds, type(exc).__name__)
            self._begin(seconds, started)

    def _begin(self, seconds: float, started: float) -> None:
        job = self.delivery.job

        def lost() -> None:
            log.warning("event=visibility_lost job_id=%s kind=%s: the job may be delivered "
                        "again", job.id, job.kind)

        self._heartbeat = Heartbeat(
            f"visibility:{job.id}", seconds / 3.0, self._renew(seconds), lost, lease=seconds,
        ).start(started)

    def _renew(self, seconds: float) -> Callable[[], bool]:
        def renew() -> bool:
            self.router.extend(self.delivery, seconds)
            return True

        return renew

    def _end(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
