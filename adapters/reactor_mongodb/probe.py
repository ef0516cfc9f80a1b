"""Contract-suite probes of the MongoDB adapter (entry points ``reactor.probes`` and
``reactor.router_probes`` for ``mongodb``, ``mongodb+srv`` and the test-only ``mongomock``).

The storage probe is :class:`reactor_contract.generic_probe.GenericProbe` over the adapter's
:class:`reactor_mongodb.documents.MongoDocumentStore`, whose ``raw`` and ``set_expiry`` read and
rewrite documents directly (bypassing logical expiry, keeping the version). Imported only by
the contract suite: it needs the ``reactor_contract`` package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.router import MongoRouter
from reactor_mongodb.storage import MongoStorage

__all__ = ["MongoCleanup", "MongoRouterProbe", "probe_for", "router_probe_for"]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`MongoStorage`.

    With the application clock (``clock=application``, always on ``mongomock://``) it offers
    :class:`reactor_contract.probe.ClockProbe`: ``with_clock`` builds a second ``MongoStorage``
    on the same database, prefix and client whose clock is the given one. With the server
    clock ``with_clock`` returns ``None``: every process reads the same clock
    (docs/coordination.md#clock-skew); ``documents_with_clock`` still gives the document store
    over the same documents judged by the given clock, for the expiry boundary.

    Raises:
        TypeError: ``storage`` is not a ``MongoStorage``.
    """
    if not isinstance(storage, MongoStorage):
        raise TypeError(f"probe_for needs a MongoStorage, got {type(storage).__name__}")
    documents, context_ttl = storage.documents, storage.context_ttl

    def clocked(clock: Callable[[], float]) -> Storage | None:
        """A ``MongoStorage`` on the same documents judged by ``clock`` (shares the client)."""
        if documents.clock_kind != "application":
            return None
        twin = MongoDocumentStore(
            documents.database,
            prefix=documents.prefix,
            clock=clock,
            gc_grace=documents.gc_grace,
            max_document_bytes=documents.max_document_bytes,
            owns_client=False,
        )
        return MongoStorage(twin, context_ttl=context_ttl)

    def clocked_documents(clock: Callable[[], float]) -> MongoDocumentStore:
        """The documents judged by ``clock`` whatever the storage's clock (the store compares
        expiry with the ``now`` it reads, so this runs the same filters): the document
        primitive's expiry boundary is checked on a server-clock storage too."""
        return MongoDocumentStore(
            documents.database,
            prefix=documents.prefix,
            clock=clock,
            gc_grace=documents.gc_grace,
            max_document_bytes=documents.max_document_bytes,
            owns_client=False,
        )

    cleanup = MongoCleanup(documents.database, documents.prefix)
    return GenericProbe(documents, drivers=[(_unwrapped(documents.database), "client")],
                      clocked=clocked, clocked_documents=clocked_documents, cleanup=cleanup)


def _unwrapped(database: Any) -> Any:
    """The database whose ``client`` attribute is the driver's own ``MongoClient``: on
    ``mongomock://`` the store holds a :class:`reactor_mongodb.testing.Serialized` proxy,
    whose ``client`` would be another proxy, so the fault injector is given the mongomock
    database behind it (docs/contract-suite.md, "Faults injected at the driver")."""
    from reactor_mongodb.testing import Serialized

    return database._target if isinstance(database, Serialized) else database


class MongoCleanup:
    """Empties and lists one namespace: the collections whose names start with ``prefix``
    (documents, signals, a router's jobs and dead letters), dropped with their indexes
    (the contract suite's ``CleanupProbe``, docs/contract-suite.md, "Cleanup: nothing left
    behind").

    Args:
        database: the pymongo (or mongomock) database.
        prefix: the namespace's collection-name prefix; an empty one is refused.

    Raises:
        ValueError: ``prefix`` is empty (that would be the whole database).
    """

    def __init__(self, database: Any, prefix: str) -> None:
        if not prefix:
            raise ValueError("MongoCleanup needs a non-empty prefix (it drops collections)")
        self.database = database
        self.prefix = prefix

    def leftovers(self) -> list[str]:
        """The namespace's collection names, sorted."""
        return sorted(n for n in self.database.list_collection_names()
                      if n.startswith(self.prefix))

    def purge_namespace(self) -> int:
        """Drop every collection of the namespace; returns how many were dropped."""
        names = self.leftovers()
        for name in names:
            self.database.drop_collection(name)
        return len(names)


class MongoRouterProbe:
    """Injects raw messages into a :class:`MongoRouter`'s queue.

    Args:
        router: the router under test.
    """

    def __init__(self, router: MongoRouter) -> None:
        self.router = router

    def driver_clients(self) -> list[tuple[object, str]]:
        """``[(router.database, "client")]``: the ``MongoClient`` of the router's collections
        (docs/contract-suite.md, "Faults injected at the driver")."""
        return [(_unwrapped(self.router.database), "client")]

    def inject_raw(self, body: str | bytes) -> None:
        """Queue ``body`` as a message, due now, without validating it (bytes are stored as
        BSON binary, byte for byte)."""
        self.router.enqueue_raw(body)

    def _cleanup(self) -> MongoCleanup:
        jobs = self.router.jobs
        return MongoCleanup(jobs.database, jobs.name.removesuffix("jobs"))

    def purge_namespace(self) -> int:
        """Drop the router's collections (``<prefix>jobs``, ``<prefix>dead_letters``)."""
        return self._cleanup().purge_namespace()

    def leftovers(self) -> list[str]:
        """The router prefix's collection names, sorted."""
        return self._cleanup().leftovers()


def router_probe_for(router: Router) -> RouterProbe:
    """The router probe of a :class:`MongoRouter`.

    Raises:
        TypeError: ``router`` is not a ``MongoRouter``.
    """
    if not isinstance(router, MongoRouter):
        raise TypeError(f"router_probe_for needs a MongoRouter, got {type(router).__name__}")
    return MongoRouterProbe(router)
