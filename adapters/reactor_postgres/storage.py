"""``PostgresStorage``: the whole storage protocol on PostgreSQL (docs/adapters/postgres.md).

:class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor_postgres.documents.PostgresDocumentStore`: every semantic comes from the generic
stores (docs/protocol.md#document-stores); PostgreSQL supplies atomicity (one-statement
compare-and-set by version), indexed keyset scans, the clock (the server's, calibrated) and
signals (``LISTEN``/``NOTIFY``, :mod:`reactor_postgres.signals`).
"""

from __future__ import annotations

from collections.abc import Callable

from reactor.generic.storage import GenericStorage
from reactor.ports.clock import CalibratedClock, Clock
from reactor.ports.driver_errors import translate_errors
from reactor.ports.storage import Capabilities
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient
from reactor_postgres.documents import PostgresDocumentStore
from reactor_postgres.signals import PostgresSignalStore

__all__ = ["POSTGRES_CAPABILITIES", "PostgresStorage", "server_clock"]

#: Signals (LISTEN/NOTIFY), no document limit (``text`` holds up to 1 GB), the server clock.
POSTGRES_CAPABILITIES = Capabilities(signals=True, max_document_bytes=None, clock="server")


def server_clock(client: PostgresClient, *, refresh_seconds: float = 60.0) -> CalibratedClock:
    """The server's ``clock_timestamp()`` read cheaply: one round trip per ``refresh_seconds``,
    in between the local clock plus the measured offset (microsecond resolution).

    Raises (from ``now()``):
        StorageError: a due calibration failed.
    """

    def read() -> float:
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL clock"):
            return client.server_time()

    return CalibratedClock(read, resolution=1e-6, refresh_seconds=refresh_seconds)


class PostgresStorage(GenericStorage):
    """A :class:`reactor.ports.Storage` on PostgreSQL.

    Args:
        client: the pooled client (closed with the storage when ``owns_client``).
        prefix: the namespace inside the schema (``""`` = none).
        context_ttl: retention in seconds of durable run state after its last write.
        clock: the store clock (epoch seconds); ``None``: the server's calibrated clock. A
            probe's twin passes its own.
        owns_client: close ``client`` in :meth:`close`.

    Attributes:
        documents: the :class:`PostgresDocumentStore` (its ``raw``/``set_expiry`` serve probes).
        client: the pooled client.
    """

    documents: PostgresDocumentStore

    def __init__(
        self,
        client: PostgresClient,
        *,
        prefix: str = "",
        context_ttl: float = 86400.0,
        clock: Callable[[], float] | Clock | None = None,
        owns_client: bool = True,
    ) -> None:
        self.client = client
        self._signal_store = PostgresSignalStore(client, prefix)
        super().__init__(
            PostgresDocumentStore(
                client,
                prefix=prefix,
                clock=server_clock(client).now if clock is None else clock,
                owns_client=owns_client,
            ),
            context_ttl=context_ttl,
            signals=self._signal_store,
            capabilities=POSTGRES_CAPABILITIES,
        )

    def ping(self) -> None:
        """One round trip (``SELECT 1``).

        Raises:
            StorageError: PostgreSQL failed.
        """
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL ping"), \
                self.client.connection() as conn:
            conn.execute("SELECT 1")

    def close(self) -> None:
        """Close open signal subscriptions, then the document store; idempotent."""
        self._signal_store.close_all()
        super().close()
