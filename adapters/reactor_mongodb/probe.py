"""Contract-suite probes of the MongoDB adapter (entry points ``reactor.probes`` and
``reactor.router_probes`` for ``mongodb``, ``mongodb+srv`` and the test-only ``mongomock``).

The storage probe is :class:`reactor_contract.generic_probe.GenericProbe` over the adapter's
:class:`reactor_mongodb.documents.MongoDocumentStore`, whose ``raw`` and ``set_expiry`` read and
rewrite documents directly (bypassing logical expiry, keeping the version). Imported only by
the contract suite: it needs the ``reactor_contract`` package.
"""

from __future__ import annotations

from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_mongodb.router import MongoRouter
from reactor_mongodb.storage import MongoStorage

__all__ = ["MongoRouterProbe", "probe_for", "router_probe_for"]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`MongoStorage`.

    Raises:
        TypeError: ``storage`` is not a ``MongoStorage``.
    """
    if not isinstance(storage, MongoStorage):
        raise TypeError(f"probe_for needs a MongoStorage, got {type(storage).__name__}")
    return GenericProbe(storage.documents)


class MongoRouterProbe:
    """Injects raw messages into a :class:`MongoRouter`'s queue.

    Args:
        router: the router under test.
    """

    def __init__(self, router: MongoRouter) -> None:
        self.router = router

    def inject_raw(self, body: str) -> None:
        """Queue ``body`` as a message, due now, without validating it."""
        self.router.enqueue_raw(body)


def router_probe_for(router: Router) -> RouterProbe:
    """The router probe of a :class:`MongoRouter`.

    Raises:
        TypeError: ``router`` is not a ``MongoRouter``.
    """
    if not isinstance(router, MongoRouter):
        raise TypeError(f"router_probe_for needs a MongoRouter, got {type(router).__name__}")
    return MongoRouterProbe(router)
