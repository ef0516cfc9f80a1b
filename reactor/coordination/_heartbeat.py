"""A daemon thread that renews a lease on an interval until stopped or the lease is lost.

Shared by the lock extender, the semaphore lease extender and the ordered-lock heartbeat
(storage-protocol.md §2.8 "Auto-extend"): every ``interval`` seconds it calls ``renew``; a
``False`` answer means the lease is gone, so it calls ``on_lost`` and stops; an exception
(a storage outage) is logged and the next tick tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Heartbeat"]

log = logging.getLogger("reactor.coordination")


class Heartbeat:
    """Renew a lease from a daemon thread.

    Args:
        name: the thread's name (shown in thread dumps).
        interval: seconds between renewals.
        renew: returns ``True`` while the lease is still held.
        on_lost: called once, from the thread, when ``renew`` returns ``False``.
    """

    def __init__(
        self,
        name: str,
        interval: float,
        renew: Callable[[], bool],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.interval = interval
        self._renew = renew
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)

    def start(self) -> Heartbeat:
        """Start the thread; returns ``self``."""
        self._thread.start()
        return self

    def run(self, wait: Callable[[float], bool] | None = None) -> None:
        """The loop; runs in the thread (callable directly in tests with a fake ``wait``)."""
        wait = wait or self._stop.wait
        while not wait(self.interval):
            try:
                renewed = self._renew()
            except Exception as exc:
                log.warning("event=renew_error name=%s error=%s", self.name, exc)
                continue
            if not renewed:
                log.warning("event=lease_lost name=%s", self.name)
                if self._on_lost is not None:
                    self._on_lost()
                return

    def stop(self) -> None:
        """Stop the thread and wait for it (unless called from the thread itself)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
