"""The period client: "at most once per calendar bucket" (``docs/coordination.md``).

The bucket is computed from the store's clock (:meth:`reactor.ports.Storage.now`), and the
mark is first-wins in storage, so two runs racing in one bucket cannot both mark it (the fix
of the classic check-then-set race). Marking happens only after a plain ``Success``.
"""

from __future__ import annotations

from collections.abc import Callable

from reactor.model.coordination.periods import Every, bucket_key, ttl_seconds
from reactor.model.records import PeriodMarker
from reactor.ports.storage import PeriodStore

__all__ = ["Period"]


class Period:
    """A once-per-bucket gate on one base key.

    Args:
        store: the period sub-store.
        base: the gated key (e.g. ``"invoice:customer-42"``).
        every: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``, ``"month"``, ``"year"`` or a
            whole number of seconds.
        now: the clock the bucket is computed from (the storage clock).

    Raises:
        ValueError: ``every`` is not a known period.
    """

    def __init__(
        self, store: PeriodStore, base: str, every: Every, *, now: Callable[[], float]
    ) -> None:
        ttl_seconds(every)  # validates ``every`` early
        self.store = store
        self.base = base
        self.every = every
        self._now = now

    def key(self) -> str:
        """The current bucket's key, ``"period:<base>:<bucket>"``."""
        return bucket_key(f"period:{self.base}", self.every, self._now())

    def seen(self) -> bool:
        """Whether the current bucket is already marked."""
        return self.store.marker(self.key()) is not None

    def marker(self) -> PeriodMarker | None:
        """The current bucket's marker, if any."""
        return self.store.marker(self.key())

    def mark(self, context_id: str | None = None) -> bool:
        """Mark the current bucket if unmarked; ``True`` when this call marked it.

        The marker lives twice the period, so it outlives its bucket.
        """
        return self.store.mark(self.key(), ttl=ttl_seconds(self.every), context_id=context_id)
