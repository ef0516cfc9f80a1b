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
from reactor.memory import LocalRouter, MemoryStorage
from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe, UnsupportedBody

__all__ = [
    "GenericRouterProbe",
    "LocalRouterProbe",
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

    return GenericProbe(documents, clocked=clocked)


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


def generic_router_probe(router: Router) -> RouterProbe:
    """The router probe of a :class:`reactor.generic.router.GenericRouter` (``memqueue://``,
    and any third-party router built on one).

    Raises:
        TypeError: ``router`` is not a ``GenericRouter``.
    """
    if not isinstance(router, GenericRouter):
        raise TypeError(f"generic_router_probe needs a GenericRouter, got {type(router).__name__}")
    return GenericRouterProbe(router)
