"""Cleanup: the suite leaves nothing behind (docs/contract-suite.md, "Cleanup: nothing left
behind").

Every test runs in a namespace of its own (a ``?prefix=``); when it ends the suite empties the
namespace through the probe's optional :class:`reactor_contract.probe.CleanupProbe`
capability. These tests check that capability: after ``purge_namespace`` the namespace holds
nothing (expired records and fence tombstones included), a second purge finds nothing, and
another namespace is untouched. A probe without the capability makes them skip, and the
``cleanup`` row shows a gap: the run then leaves its records in the backend.
"""

from __future__ import annotations

import pytest

from reactor.model.records import RateWindow
from reactor.ports.router import Job, Router
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, SUITE_DOC, context, step_result, teach, uid
from reactor_contract.plugin import open_storage
from reactor_contract.probe import CleanupProbe, Probe, RouterProbe

__all__ = ["NO_CLEANUP", "CleanupContract", "RouterCleanupContract"]

#: The skip reason of a probe without the capability (a gap: the run leaves data behind).
NO_CLEANUP = (
    "capability: the probe cannot empty its namespace (no CleanupProbe.purge_namespace), so "
    "the run leaves its records behind"
)
_WHERE = f'{SUITE_DOC}, "Cleanup: nothing left behind"'


def _cleanup(probe: object) -> CleanupProbe:
    if not isinstance(probe, CleanupProbe) or probe.leftovers() is None:
        pytest.skip(NO_CLEANUP)
    return probe


def _fill(storage: Storage) -> str:
    """Write something of every kind into ``storage``; returns the context id."""
    ctx = context(status="running")
    storage.contexts.save(ctx)
    storage.step_results.put(step_result(ctx.context_id, "charge", status="dispatched"))
    storage.claims.claim_correlation_id(uid("cor"), ctx.context_id)
    storage.claims.claim_idempotency_key("orders", uid("idem"), ctx.context_id)
    lock = uid("lock")
    assert storage.locks.acquire(lock, "owner", HOUR)
    storage.locks.release(lock, "owner")  # leaves a fence tombstone for FENCE_RETENTION
    storage.semaphores.acquire(uid("sem"), "holder", 2, HOUR)
    storage.rate_limits.hit(uid("rate"), [RateWindow("hour", HOUR, 5)])
    storage.periods.mark(uid("period"), ttl=HOUR)
    return ctx.context_id


class CleanupContract:
    """The storage probe's :class:`CleanupProbe`: a purged namespace holds nothing."""

    reactor_concern = "cleanup"

    @pytest.mark.obligations("O-cleanup-1", "O-cleanup-2", "O-cleanup-3")
    def test_a_purged_namespace_holds_nothing(self, storage: Storage, probe: Probe) -> None:
        cleanup = _cleanup(probe)
        expired = _fill(storage)
        probe.expire("context", expired)  # an expired record is purged too
        before = cleanup.leftovers()
        assert before, teach(
            "cleanup", "leftovers() lists what the namespace holds",
            "listing another prefix, or only live records", _WHERE,
        )
        deleted = cleanup.purge_namespace()
        assert deleted is not None and deleted >= 1, teach(
            "cleanup", f"purge_namespace() returns how many records it deleted, got {deleted!r}",
            "returning None (the probe cannot) from a probe that purged", _WHERE,
        )
        left = cleanup.leftovers()
        assert left == [], teach(
            "cleanup", f"after purge_namespace() nothing of the namespace remains, found {left}",
            "deleting only live records (expired ones and fence tombstones stay), or only "
            "some collections", _WHERE,
        )
        again = cleanup.purge_namespace()
        assert again == 0, teach(
            "cleanup", f"a second purge_namespace() deletes nothing and returns 0, got {again!r}",
            "counting what was asked, not what was deleted", _WHERE,
        )

    @pytest.mark.obligations("O-cleanup-4")
    def test_a_purge_leaves_other_namespaces_alone(
        self, storage: Storage, probe: Probe, reactor_storage_url: str
    ) -> None:
        cleanup = _cleanup(probe)
        other = open_storage(reactor_storage_url)
        try:
            kept = context(status="running")
            other.contexts.save(kept)
            _fill(storage)
            cleanup.purge_namespace()
            assert other.contexts.load(kept.context_id) is not None, teach(
                "cleanup", "purge_namespace() deletes only its own namespace",
                "a prefix match without the separator, or a purge of the whole database",
                _WHERE,
            )
        finally:
            other.close()


class RouterCleanupContract:
    """The router probe's :class:`CleanupProbe`: a purged queue namespace holds nothing."""

    reactor_concern = "cleanup"

    @pytest.mark.obligations("O-cleanup-5")
    def test_a_purged_router_namespace_holds_nothing(
        self, router: Router, router_probe: RouterProbe
    ) -> None:
        cleanup = _cleanup(router_probe)
        router.enqueue(Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders"}))
        router.enqueue(Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders"}),
                       delay_seconds=HOUR)  # a delayed message is purged too
        router_probe.inject_raw('["not", "a", "job"]')  # dead-lettered on receive
        router.receive(max_jobs=10, wait_seconds=0.5)
        assert cleanup.purge_namespace() is not None
        left = cleanup.leftovers()
        assert left == [], teach(
            "cleanup", f"after purge_namespace() nothing of the router's namespace remains, "
            f"found {left}", "keeping the dead letters, a delayed set or a lease index", _WHERE,
        )


class TestCleanup(CleanupContract):
    pass


class TestRouterCleanup(RouterCleanupContract):
    pass
