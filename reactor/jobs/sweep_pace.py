"""Back-pressure and pace for the sweep chain (docs/workers.md, "Back-pressure and pace").

Two things keep a tick of the sweep chain from making a slow deployment slower:

* **Back-pressure.** When the router counts its queue cheaply
  (:class:`reactor.ports.QueueInspector`) and at least ``sweeper_backlog`` jobs are ready, the
  tick re-dispatches nothing: every lost unit stays in its index (its cursor is not moved), and
  a later tick recovers it once the workers caught up. Enqueueing into a deep queue only
  lengthens it, and the copies it adds mostly meet units their first job already finished.
* **Pace.** Each sweeper's pass is kept to about a quarter of ``sweeper_interval`` by sizing
  its page from the rows per second its previous chain pass handled in this process (at least
  :data:`MIN_PAGE` rows, at most ``sweeper_limit``). A pass on a slow backend reads fewer rows
  and the next tick resumes from its cursor, instead of one pass outlasting several windows.

Both apply to ticks of the chain only; ``reactor sweep``, an ad-hoc tick and direct calls read
``sweeper_limit`` rows and re-dispatch at once (an operator's sweep).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from reactor.config import Runtime
from reactor.ports.inspection import QueueInspector

__all__ = ["MIN_PAGE", "PASS_SHARE", "SweepPace", "ready_backlog"]

#: The fewest rows a paced pass reads (a pass always makes progress).
MIN_PAGE = 10

#: The share of ``sweeper_interval`` one sweeper's pass aims at (three sweepers per tick).
PASS_SHARE = 0.25


def ready_backlog(runtime: Runtime) -> int | None:
    """The jobs ready in the router's queue when that is at least ``sweeper_backlog``.

    Args:
        runtime: the router and the settings.

    Returns:
        The ready count that defers the tick; ``None`` when the tick goes ahead: the queue is
        shallower, the setting is ``None``, or the router cannot count cheaply or failed to
        (a failure is no reason to stop recovering work).
    """
    limit = runtime.settings.sweeper_backlog
    router = runtime.router
    if limit is None or not isinstance(router, QueueInspector):
        return None
    try:
        ready = router.queue_stats().ready
    except Exception:
        return None
    return ready if ready is not None and ready >= limit else None


class SweepPace:
    """The rows per second each sweeper handled in its last chain passes, per storage.

    Kept in process memory (a worker that starts measures afresh: its first pass reads
    ``sweeper_limit`` rows). Thread-safe.

    Args:
        storage: the storage the sweepers scan (the pace is kept per storage object).
    """

    _by_storage: weakref.WeakKeyDictionary[Any, dict[str, float]] = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self, storage: object) -> None:
        with self._lock:
            try:
                self._rates = self._by_storage.setdefault(storage, {})
            except TypeError:  # not weakly referenceable: no memory across ticks
                self._rates = {}

    def page(self, sweeper: str, *, limit: int, interval: float) -> int:
        """How many rows ``sweeper`` reads this pass.

        Args:
            sweeper: ``"runs"``, ``"steps"`` or ``"maps"``.
            limit: the most rows (``sweeper_limit``), at least 1.
            interval: ``sweeper_interval``, seconds.

        Returns:
            ``limit`` until a pass was measured; then the rows the measured rate handles in
            ``PASS_SHARE x interval`` seconds, clamped to ``[min(MIN_PAGE, limit), limit]``.
        """
        rate = self._rates.get(sweeper)
        if rate is None:
            return limit
        return max(min(MIN_PAGE, limit), min(limit, int(rate * PASS_SHARE * interval)))

    def observe(self, sweeper: str, rows: int, seconds: float) -> None:
        """Record a pass of ``sweeper`` that handled ``rows`` rows in ``seconds`` seconds.

        A pass that handled no row, or took no measurable time, says nothing about the pace and
        is ignored; otherwise the rate is averaged with the previous one (halving a spike's
        weight at each pass).
        """
        if rows <= 0 or seconds <= 0:
            return
        rate = rows / seconds
        with self._lock:
            previous = self._rates.get(sweeper)
            self._rates[sweeper] = rate if previous is None else (previous + rate) / 2
