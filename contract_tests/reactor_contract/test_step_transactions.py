"""Transactional steps, an optional storage capability (docs/protocol.md, "Transactional
steps").

A storage that declares :class:`~reactor.ports.capabilities.RunsStepTransactions` is held to
what the engine relies on: writes of the bound thread commit or vanish together, other threads
stay outside, a stale fence is still refused inside. A storage that does not declare it skips
the concern as not applicable (verdict ``n/a``): it runs every other reactor feature, and
``Reactor.run`` refuses a transactional step on it with ``ConfigurationError``
(docs/contract-suite.md, "Verdicts").
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import pytest

from reactor.errors import StaleWriterError
from reactor.model.records import Fence
from reactor.ports.capabilities import RunsStepTransactions, declares
from reactor.ports.storage import Storage
from reactor_contract._support import context, uid
from reactor_contract.plugin import NOT_APPLICABLE

__all__ = ["NO_TRANSACTIONS", "StepTransactionsContract"]

#: The skip reason of a storage without the capability (an ``n/a`` row, not a gap).
NO_TRANSACTIONS = (
    f"{NOT_APPLICABLE} the storage does not run transactional steps (it does not declare "
    "RunsStepTransactions)"
)

T = TypeVar("T")


def _elsewhere(fn: Callable[[], T]) -> T:
    """``fn()`` on another thread (outside any binding of this one), its result or error."""
    box: dict[str, object] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller
            box["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "an operation of another thread waited for the transaction"
    if "error" in box:
        raise cast(BaseException, box["error"])
    return cast(T, box["value"])


class StepTransactionsContract:
    """:class:`~reactor.ports.capabilities.StepTransaction` behaviour of storages that
    declare :class:`~reactor.ports.capabilities.RunsStepTransactions`."""

    reactor_concern = "step_transactions"

    @pytest.fixture
    def transactional(self, storage: Storage) -> RunsStepTransactions:
        """The storage as a transaction opener; skips (n/a) without the capability."""
        if not declares(storage, RunsStepTransactions):
            pytest.skip(NO_TRANSACTIONS)
        return cast(RunsStepTransactions, storage)

    @pytest.mark.obligations("O-step_transactions-1")
    def test_writes_inside_binding_are_invisible_until_commit(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        record = context()
        transaction = transactional.begin_step_transaction()
        try:
            with transaction.binding():
                storage.contexts.save(record)
            assert _elsewhere(lambda: storage.contexts.load(record.context_id)) is None
            assert storage.contexts.load(record.context_id) is None  # unbound: outside too
        except BaseException:
            transaction.rollback()
            raise
        transaction.commit()
        assert storage.contexts.load(record.context_id) == record
        assert _elsewhere(lambda: storage.contexts.load(record.context_id)) == record

    @pytest.mark.obligations("O-step_transactions-2")
    def test_rollback_discards_every_write_and_is_idempotent(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        record, lock = context(), uid("lock")
        transaction = transactional.begin_step_transaction()
        with transaction.binding():
            storage.contexts.save(record)
            assert storage.locks.acquire(lock, "owner", 60.0)
        transaction.rollback()
        transaction.rollback()
        assert storage.contexts.load(record.context_id) is None
        assert not storage.locks.held(lock)

        kept = context()
        committed = transactional.begin_step_transaction()
        with committed.binding():
            storage.contexts.save(kept)
        committed.commit()
        committed.rollback()  # after the commit: nothing changes
        assert storage.contexts.load(kept.context_id) == kept

    @pytest.mark.obligations("O-step_transactions-3")
    def test_the_bound_thread_reads_its_own_writes(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        record = context()
        transaction = transactional.begin_step_transaction()
        try:
            with transaction.binding():
                storage.contexts.save(record)
                assert storage.contexts.load(record.context_id) == record
                updated = dataclasses.replace(record, status="completed", document='{"v":2}')
                storage.contexts.save(updated)
                assert storage.contexts.load(record.context_id) == updated
        finally:
            transaction.rollback()
        assert storage.contexts.load(record.context_id) is None

    @pytest.mark.obligations("O-step_transactions-4")
    def test_other_threads_stay_outside_the_transaction(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        inside, outside, lock = context(), context(), uid("lock")
        transaction = transactional.begin_step_transaction()
        try:
            with transaction.binding():
                storage.contexts.save(inside)
                _elsewhere(lambda: storage.contexts.save(outside))
                assert _elsewhere(lambda: storage.locks.acquire(lock, "renewer", 60.0))
                assert _elsewhere(lambda: storage.contexts.load(outside.context_id)) == outside
        finally:
            transaction.rollback()
        assert storage.contexts.load(inside.context_id) is None
        assert storage.contexts.load(outside.context_id) == outside
        assert storage.locks.held(lock)

    @pytest.mark.obligations("O-step_transactions-5")
    def test_a_stale_fence_is_refused_inside_the_transaction(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        first = context(status="running", document='{"v":1}')
        done = dataclasses.replace(first, status="completed", document='{"v":2}')
        stale = dataclasses.replace(first, document='{"v":"stale"}')
        key = f"async:{first.context_id}"
        storage.contexts.save(first, fence=Fence(key=key, owner=uid("o"), token=100))
        storage.contexts.save(done, fence=Fence(key=key, owner=uid("o"), token=200))
        transaction = transactional.begin_step_transaction()
        try:
            with transaction.binding(), pytest.raises(StaleWriterError):
                storage.contexts.save(stale, fence=Fence(key=key, owner=uid("o"), token=100))
        finally:
            transaction.rollback()
        assert storage.contexts.load(first.context_id) == done

    @pytest.mark.obligations("O-step_transactions-6")
    def test_transactions_are_independent_and_give_their_connections_back(
        self, storage: Storage, transactional: RunsStepTransactions
    ) -> None:
        kept, dropped = context(), context()
        one = transactional.begin_step_transaction()
        two = transactional.begin_step_transaction()
        try:
            with one.binding():
                storage.contexts.save(kept)
            with two.binding():
                storage.contexts.save(dropped)
            one.commit()
        finally:
            two.rollback()
            one.rollback()
        assert storage.contexts.load(kept.context_id) == kept
        assert storage.contexts.load(dropped.context_id) is None
        for n in range(60):  # more than any reasonable pool: a leak would block or fail here
            transaction = transactional.begin_step_transaction()
            with transaction.binding():
                storage.contexts.load(kept.context_id)
            if n % 2:
                transaction.commit()
            else:
                transaction.rollback()
        assert storage.contexts.load(kept.context_id) == kept


class TestStepTransactions(StepTransactionsContract):
    """The transactional-steps contract against ``--reactor-storage``."""
