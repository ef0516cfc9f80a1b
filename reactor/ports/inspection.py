"""Optional inspection capabilities of storages and routers (``reactor info``, ``reactor ping``).

None of these is part of :class:`reactor.ports.Storage` or :class:`reactor.ports.Router`: an
adapter implements one only where its backend answers cheaply (a counter, a length, a metadata
call; never a scan of the data). The commands check each with :func:`isinstance` against these
runtime-checkable protocols and print ``unknown`` where an adapter has none (docs/workers.md,
"Running workers").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Pingable", "QueueInspector", "QueueStats", "SweepIndexInspector"]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A router's job counts at one moment; ``None`` where the backend cannot tell cheaply.

    Attributes:
        ready: jobs due and waiting to be received.
        delayed: jobs waiting for their delay to pass (retries and parks included).
        in_flight: jobs received and not yet acked, retried or dead-lettered.
        dead_letters: messages in the dead-letter place.
        consumers: consumers (worker processes) the backend saw recently, where it tracks them.
    """

    ready: int | None = None
    delayed: int | None = None
    in_flight: int | None = None
    dead_letters: int | None = None
    consumers: int | None = None


@runtime_checkable
class QueueInspector(Protocol):
    """A router that counts its queue cheaply (``reactor info``)."""

    def queue_stats(self) -> QueueStats:
        """The current counts (approximate where the backend is).

        Raises:
            RouterError: the backend failed.
        """
        ...


@runtime_checkable
class SweepIndexInspector(Protocol):
    """A storage that sizes the indexes the sweepers walk cheaply (``reactor info``)."""

    def sweep_index_sizes(self) -> Mapping[str, int]:
        """Entries per sweep index: ``runs`` (running or rolling back), ``steps`` (dispatched
        async steps), ``maps`` (active fan-out maps), ``map_rollbacks`` (started map
        rollbacks); an adapter may leave out what it cannot count. Entries that expired but
        were not trimmed yet may be counted.

        Raises:
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class Pingable(Protocol):
    """A storage or router with a cheap round trip to its backend (``reactor ping``).

    Without it, ``reactor ping`` reads one page of runs (storage) or one dead letter (router).
    """

    def ping(self) -> None:
        """One round trip to the backend.

        Raises:
            StorageError, RouterError: the backend cannot be reached or refused the call.
        """
        ...
