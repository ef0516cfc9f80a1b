"""Contract-suite probes of the PostgreSQL adapter (entry points ``reactor.probes`` and
``reactor.router_probes`` for ``postgresql`` and ``postgres``; docs/contract-suite.md,
"The probe").

The storage probe is :class:`reactor_contract.generic_probe.GenericProbe` over the adapter's
:class:`reactor_postgres.documents.PostgresDocumentStore`, whose ``raw`` and ``set_expiry`` read
and rewrite rows directly (bypassing logical expiry, keeping the version). Imported only by
the contract suite: it needs the ``reactor_contract`` package.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg import sql
from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_postgres.documents import PostgresDocumentStore, like_prefix
from reactor_postgres.router import PostgresRouter
from reactor_postgres.storage import PostgresStorage

__all__ = [
    "PostgresCleanup", "PostgresRouterProbe", "probe_for", "router_probe_for",
]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`PostgresStorage`.

    With the server clock (``Capabilities.clock == "server"``, the default), which no client
    sets, ``with_clock`` returns ``None`` (the contract suite refuses a "server" clock that
    follows an injected one; docs/coordination.md#clock-skew); ``documents_with_clock`` still
    gives the document store over the same rows judged by the given clock, for the document
    primitive's expiry boundary. With ``clock=application`` ``with_clock`` builds a second
    ``PostgresStorage`` on the same pool, schema and prefix (not owning the pool) whose clock
    is the given one.

    Raises:
        TypeError: ``storage`` is not a ``PostgresStorage``.
    """
    if not isinstance(storage, PostgresStorage):
        raise TypeError(f"probe_for needs a PostgresStorage, got {type(storage).__name__}")

    documents, context_ttl, capabilities = (
        storage.documents, storage.context_ttl, storage.capabilities
    )

    def clocked(clock: Callable[[], float]) -> Storage | None:
        """A twin judged by ``clock``; ``None`` on the server clock (every process reads
        the one server clock)."""
        if capabilities.clock == "server":
            return None
        return PostgresStorage(
            documents.client, prefix=documents.prefix, context_ttl=context_ttl, clock=clock,
            owns_client=False, capabilities=capabilities,
        )

    def clocked_documents(clock: Callable[[], float]) -> PostgresDocumentStore:
        """The documents over the same rows judged by ``clock``: the store takes ``now`` as a
        statement parameter, so this runs the very SQL the server-clock store runs."""
        return PostgresDocumentStore(documents.client, prefix=documents.prefix, clock=clock,
                                     owns_client=False)

    return GenericProbe(documents, drivers=[(documents.client, "pool")], clocked=clocked,
                        clocked_documents=clocked_documents, cleanup=PostgresCleanup(documents))


class PostgresCleanup:
    """Empties and lists one store's namespace: the rows whose collection starts with
    ``"<prefix>:"`` (the contract suite's ``CleanupProbe``, docs/contract-suite.md, "Cleanup:
    nothing left behind").

    Args:
        documents: the store whose namespace it empties; an unprefixed store is refused.

    Raises:
        ValueError: the store has no prefix (its namespace would be the whole schema).
    """

    def __init__(self, documents: PostgresDocumentStore) -> None:
        if not documents.prefix:
            raise ValueError("PostgresCleanup needs a prefixed store (it deletes by prefix)")
        self.documents = documents

    def _pattern(self) -> str:
        return like_prefix(self.documents.prefix + ":")

    def purge_namespace(self) -> int:
        """Delete every row of the namespace, expired ones included; returns the count."""
        statement = sql.SQL("DELETE FROM {}.documents WHERE collection LIKE %s ESCAPE '\\'")
        with self.documents.client.connection() as conn:
            cursor = conn.execute(
                statement.format(sql.Identifier(self.documents.client.schema)),
                (self._pattern(),),
            )
            return int(cursor.rowcount)

    def leftovers(self) -> list[str]:
        """``"<collection>/<key>"`` of every row still in the namespace, sorted."""
        statement = sql.SQL(
            "SELECT collection, key FROM {}.documents WHERE collection LIKE %s ESCAPE '\\'"
            " ORDER BY collection, key"
        )
        with self.documents.client.connection() as conn:
            rows = conn.execute(
                statement.format(sql.Identifier(self.documents.client.schema)),
                (self._pattern(),),
            ).fetchall()
        return [f"{collection}/{key}" for collection, key in rows]


class PostgresRouterProbe:
    """Injects raw messages into a :class:`PostgresRouter`'s queue and empties it.

    Args:
        router: the router under test.
    """

    def __init__(self, router: PostgresRouter) -> None:
        self.router = router

    def driver_clients(self) -> list[tuple[object, str]]:
        """``[(queue client, "pool")]``: the ``psycopg_pool.ConnectionPool`` of the router's
        queue (docs/contract-suite.md, "Faults injected at the driver")."""
        return [(self.router.primitive.client, "pool")]

    def inject_raw(self, body: str | bytes) -> None:
        """Queue ``body`` as a message, due now, without validating it (bytes are stored as
        ``bytea``, byte for byte)."""
        self.router.enqueue_raw(body)

    def purge_namespace(self) -> int:
        """Delete every job and dead letter of the router's queue; returns how many."""
        return self.router.primitive.purge()

    def leftovers(self) -> list[str]:
        """The queue's remaining jobs and dead letters, sorted."""
        return self.router.primitive.leftovers()


def router_probe_for(router: Router) -> RouterProbe:
    """The router probe of a :class:`PostgresRouter`.

    Raises:
        TypeError: ``router`` is not a ``PostgresRouter``.
    """
    if not isinstance(router, PostgresRouter):
        raise TypeError(f"router_probe_for needs a PostgresRouter, got {type(router).__name__}")
    return PostgresRouterProbe(router)
