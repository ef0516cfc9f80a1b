"""Probe factories of the built-in in-process adapters (``memory://``, ``local://``,
``memqueue://``).

Registered in ``pyproject.toml`` under the entry-point groups ``reactor.probes`` and
``reactor.router_probes``. They live here, not in :mod:`reactor.memory`, because the core must
not depend on the contract package.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from reactor.generic.router import GenericRouter
from reactor.memory import LocalRouter, MemoryDocumentStore, MemoryStorage
from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe, UnsupportedBody

__all__ = [
    "GenericRouterProbe",
    "LocalRouterProbe",
    "MemoryCleanup",
    "generic_router_probe",
    "memory_probe",
    "memory_router_probe",
]


def memory_probe(storage: Storage) -> Probe:
    """The probe of a :class:`reactor.memory.MemoryStorage` (its document store is the backdoor).

    It offers :class:`reactor_contract.probe.ClockProbe`: ``with_clock`` builds a second
    ``MemoryStorage`` on a view of the same documents (docs/coordination.md#clock-skew).

    Raises:
        TypeError: ``storage`` is not a ``MemoryStorage``.
    """
    if not isinstance(storage, MemoryStorage):
        raise TypeError(f"memory_probe needs a MemoryStorage, got {type(storage).__name__}")
    documents, context_ttl = storage.documents, storage.context_ttl

    def clocked(clock: Callable[[], float]) -> Storage:
        """A ``MemoryStorage`` on a view of the same documents judged by ``clock``."""
        return MemoryStorage(context_ttl=context_ttl, documents=documents.with_clock(clock))

    return GenericProbe(documents, clocked=clocked, cleanup=MemoryCleanup(documents))


class MemoryCleanup:
    """:class:`reactor_contract.generic_probe.NamespaceCleanup` of a memory document store:
    its namespace is the whole store (each ``MemoryStorage`` owns its documents).

    Args:
        documents: the store to empty and list.
    """

    def __init__(self, documents: MemoryDocumentStore) -> None:
        self.documents = documents

    def leftovers(self) -> list[str]:
        """``"<collection>/<key>"`` of every stored document, expired ones included."""
        return [
            f"{collection}/{key}"
            for collection in self.documents.collections()
            for key in self.documents.keys(collection)
        ]

    def purge_namespace(self) -> int:
        """Drop every document; returns how many there were."""
        count = len(self.leftovers())
        self.documents.clear()
        return count


class LocalRouterProbe:
    """Injects raw messages into a :class:`reactor.memory.LocalRouter`.

    Args:
        router: the router under test.
    """

    def __init__(self, router: LocalRouter) -> None:
        self.router = router

    def inject_raw(self, body: str | bytes) -> None:
        """Queue ``body`` (text or any bytes) as a message, visible now, without validating it."""
        self.router.enqueue_raw(body)

    def purge_namespace(self) -> int:
        """Nothing to delete: the router's queue lives in this object and dies with it."""
        return 0

    def leftovers(self) -> list[str]:
        """Nothing outside the process: ``[]``."""
        return []


def memory_router_probe(router: Router) -> RouterProbe:
    """The router probe of ``local://``.

    Raises:
        TypeError: ``router`` is not a ``LocalRouter`` (``inline://`` runs jobs in the caller
            and has no queue to inject into).
    """
    if not isinstance(router, LocalRouter):
        raise TypeError(f"memory_router_probe needs a LocalRouter, got {type(router).__name__}")
    return LocalRouterProbe(router)


class GenericRouterProbe:
    """Injects raw messages into any :class:`reactor.generic.router.GenericRouter` through its
    queue primitive (docs/protocol.md, "Building a router").

    Args:
        router: the router under test.
    """

    def __init__(self, router: GenericRouter) -> None:
        self.router = router

    def inject_raw(self, body: str | bytes) -> None:
        """Put ``body`` on the primitive under a fresh id, visible now, without validating it.

        Raises:
            UnsupportedBody: ``body`` is bytes and the primitive refused them with a
                ``TypeError`` or ``ValueError`` (a text-only transport).
        """
        try:
            self.router.primitive.put(f"probe-{uuid.uuid4().hex}", body, 0.0)
        except (TypeError, ValueError) as exc:
            if isinstance(body, str):
                raise
            raise UnsupportedBody(f"the queue primitive refused a bytes body: {exc}") from exc

    def purge_namespace(self) -> int:
        """Nothing to delete: the in-memory primitive lives in this process and dies with it."""
        return 0

    def leftovers(self) -> list[str]:
        """Nothing outside the process: ``[]``."""
        return []


def generic_router_probe(router: Router) -> RouterProbe:
    """The router probe of a :class:`reactor.generic.router.GenericRouter` (``memqueue://``,
    and any third-party router built on one).

    Raises:
        TypeError: ``router`` is not a ``GenericRouter``.
    """
    if not isinstance(router, GenericRouter):
        raise TypeError(f"generic_router_probe needs a GenericRouter, got {type(router).__name__}")
    return GenericRouterProbe(router)
