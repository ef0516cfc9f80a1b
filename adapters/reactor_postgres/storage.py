"""``PostgresStorage``: the whole storage protocol on PostgreSQL (docs/adapters/postgres.md).

:class:`reactor.generic.storage.GenericStorage` over a
:class:`reactor_postgres.documents.PostgresDocumentStore`: every semantic comes from the generic
stores (docs/protocol.md#document-stores); PostgreSQL supplies atomicity (one-statement
compare-and-set by version), an incremental checkpoint in one statement
(:mod:`reactor_postgres.contexts`), indexed keyset scans, the clock (the server's, calibrated) and
signals (``LISTEN``/``NOTIFY``, :mod:`reactor_postgres.signals`). It runs transactional
steps (:meth:`PostgresStorage.begin_step_transaction`, :mod:`reactor_postgres.transactions`).
"""

from __future__ import annotations

from collections.abc import Callable

from reactor.generic.storage import GenericStorage
from reactor.ports.clock import CalibratedClock, Clock
from reactor.ports.driver_errors import translate_errors
from reactor.ports.storage import Capabilities
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient
from reactor_postgres.contexts import PostgresContextStore
from reactor_postgres.documents import PostgresDocumentStore
from reactor_postgres.signals import PostgresSignalStore
from reactor_postgres.transactions import PostgresStepTransaction

__all__ = ["POSTGRES_CAPABILITIES", "PostgresStorage", "capabilities_for", "server_clock"]

#: Signals (LISTEN/NOTIFY), no document limit (``text`` holds up to 1 GB), the server clock.
POSTGRES_CAPABILITIES = Capabilities(signals=True, max_document_bytes=None, clock="server")


def capabilities_for(clock: str, clock_skew: float = 0.0) -> Capabilities:
    """The capabilities of a storage on the ``"server"`` or ``"application"`` clock.

    Args:
        clock: ``"server"`` or ``"application"``.
        clock_skew: with the application clock, the skew budget in seconds (docs/coordination.md,
            "Clock skew"); ignored with the server clock.

    Raises:
        ValueError: another clock name, or a negative skew.
    """
    if clock not in ("server", "application"):
        raise ValueError(f"clock must be 'server' or 'application', got {clock!r}")
    if clock_skew < 0:
        raise ValueError(f"clock_skew must be >= 0 seconds, got {clock_skew!r}")
    if clock == "server":
        return POSTGRES_CAPABILITIES
    return Capabilities(signals=True, max_document_bytes=None, clock="application",
                        clock_skew=float(clock_skew))


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
        clock: the store clock (epoch seconds); ``None``: the server's calibrated clock with
            ``capabilities`` unset, the system clock (read at call time) with an application
            clock's ``capabilities``. A probe's twin passes its own.
        owns_client: close ``client`` in :meth:`close`.
        capabilities: what the storage declares (:func:`capabilities_for`); default the
            server clock's :data:`POSTGRES_CAPABILITIES`.

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
        capabilities: Capabilities = POSTGRES_CAPABILITIES,
    ) -> None:
        self.client = client
        self._signal_store = PostgresSignalStore(client, prefix)
        if clock is None and capabilities.clock == "server":
            clock = server_clock(client).now
        documents = PostgresDocumentStore(
            client, prefix=prefix, clock=clock, owns_client=owns_client
        )
        super().__init__(
            documents,
            context_ttl=context_ttl,
            signals=self._signal_store,
            capabilities=capabilities,
            contexts=PostgresContextStore(
                documents, context_ttl=context_ttl,
                max_document_bytes=capabilities.max_document_bytes,
            ),
        )

    def migrate(self) -> list[int]:
        """Bring the schema up to date (``reactor migrate``; docs/adapters/postgres.md,
        "Schema and migration").

        Returns:
            The migration versions applied, ascending (``[]``: already up to date).

        Raises:
            StorageError: PostgreSQL failed or refused a statement (nothing applied).
        """
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL migration"):
            return self.client.migrate_now()

    def begin_step_transaction(self) -> PostgresStepTransaction:
        """Open a transactional step's transaction on a connection of the storage's pool
        (docs/adapters/postgres.md, "Transactional steps").

        Returns:
            The open :class:`PostgresStepTransaction` (the engine commits or rolls it back).

        Raises:
            StorageError: no connection could be taken.
        """
        return PostgresStepTransaction(self.client)

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
