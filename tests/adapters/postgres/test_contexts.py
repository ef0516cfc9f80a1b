"""The PostgreSQL context store's one-statement append (docs/adapters/postgres.md, "Storage"):
the head it remembers writing is only a guess, so every way the stored head can move under it
— another process's write, a take-over with a higher fence, a whole save, a rolled-back
transaction, the head's expiry — is found by the compare-and-set and answered as the generic
store answers it. The contract suite checks everything else (contexts concern)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from reactor_postgres import _client, contexts
from reactor_postgres.storage import PostgresStorage, capabilities_for

from reactor.errors import StaleWriterError
from reactor.model.records import ContextDelta, ContextRecord, Fence

pytestmark = pytest.mark.postgres


class Clock:
    """A settable store clock (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _storage(schema_url: str, schema: str, clock: Clock | None = None,
             ttl: float = 600.0) -> PostgresStorage:
    client = _client.PostgresClient(schema_url.split("?")[0], schema=schema)
    if clock is None:
        return PostgresStorage(client, context_ttl=ttl)
    return PostgresStorage(client, context_ttl=ttl, clock=clock,
                           capabilities=capabilities_for("application"))


@pytest.fixture
def two(schema_url: str, schema: str) -> Iterator[tuple[PostgresStorage, PostgresStorage]]:
    """Two storages on the same schema: two processes' views of one deployment."""
    one, other = _storage(schema_url, schema), _storage(schema_url, schema)
    yield one, other
    one.close()
    other.close()


def _record(status: str = "running") -> ContextRecord:
    return ContextRecord(
        context_id=str(uuid.uuid4()), reactor="orders", status=status, document='{"v":0}',
        created_at=1_700_000_000.0, updated_at=1_700_000_000.0, base="b1",
    )


def _delta(record: ContextRecord, position: int, segment: str) -> ContextDelta:
    return ContextDelta(context_id=record.context_id, base=record.base, position=position,
                        status="running", updated_at=1_700_000_010.0 + position,
                        segment=segment)


def test_another_writers_append_is_found_and_the_stale_view_appends_nothing(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    one, other = two
    record = _record()
    one.contexts.save(record)
    assert one.contexts.append(_delta(record, 1, '{"s":1}'))  # remembered by `one`
    assert other.contexts.append(_delta(record, 2, '{"s":2}'))  # moved by another process
    assert not one.contexts.append(_delta(record, 2, '{"mine":2}'))  # count taken: nothing
    assert one.contexts.append(_delta(record, 3, '{"s":3}'))  # read again, then appended
    loaded = one.contexts.load(record.context_id)
    assert loaded is not None and loaded.segments == ('{"s":1}', '{"s":2}', '{"s":3}')


def test_a_take_over_with_a_higher_fence_refuses_the_remembered_writer(
    two: tuple[PostgresStorage, PostgresStorage],
) -> None:
    one, other = two
    record = _record()
    key = f"async:{record.context_id}"
    one.contexts.save(record, fence=Fence(key=key, owner="a", token=5))
    assert one.contexts.append(_delta(record, 1, '{"s":1}'), fence=Fence(key, "a", 5))
    assert other.contexts.append(_delta(record, 2, '{"b":2}'), fence=Fence(key, "b", 9))
    with pytest.raises(StaleWriterError):
        one.contexts.append(_delta(record, 3, '{"a":3}'), fence=Fence(key, "a", 5))
    loaded = other.contexts.load(record.context_id)
    assert loaded is not None and loaded.segments == ('{"s":1}', '{"b":2}')


def test_a_whole_save_elsewhere_is_found(two: tuple[PostgresStorage, PostgresStorage]) -> None:
    one, other = two
    record = _record()
    one.contexts.save(record)
    assert one.contexts.append(_delta(record, 1, '{"s":1}'))
    whole = dataclasses.replace(record, base="b2", document='{"v":"whole"}')
    other.contexts.save(whole)
    assert not one.contexts.append(_delta(record, 2, '{"s":2}'))  # another base now
    assert one.contexts.load(record.context_id) == whole


def test_a_rolled_back_transaction_leaves_no_trace_but_a_wasted_guess(
    schema_url: str, schema: str
) -> None:
    storage = _storage(schema_url, schema)
    try:
        record = _record()
        storage.contexts.save(record)
        assert storage.contexts.append(_delta(record, 1, '{"s":1}'))
        transaction = storage.begin_step_transaction()
        with transaction.binding():
            assert storage.contexts.append(_delta(record, 2, '{"rolled":2}'))
        transaction.rollback()
        assert storage.contexts.append(_delta(record, 2, '{"s":2}'))  # guess fails, reads
        loaded = storage.contexts.load(record.context_id)
        assert loaded is not None and loaded.segments == ('{"s":1}', '{"s":2}')
    finally:
        storage.close()


def test_an_expired_head_is_never_revived_from_memory(schema_url: str, schema: str) -> None:
    clock = Clock()
    storage = _storage(schema_url, schema, clock=clock, ttl=60.0)
    try:
        record = _record()
        storage.contexts.save(record)
        assert storage.contexts.append(_delta(record, 1, '{"s":1}'))
        clock.now += 60.0  # the head's expiry, inclusive: gone
        assert not storage.contexts.append(_delta(record, 2, '{"s":2}'))
        assert storage.contexts.load(record.context_id) is None
    finally:
        storage.close()


def test_the_memory_is_bounded(schema_url: str, schema: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contexts, "REMEMBERED_HEADS", 2)
    storage = _storage(schema_url, schema)
    try:
        records = [_record() for _ in range(3)]
        for record in records:
            storage.contexts.save(record)
            assert storage.contexts.append(_delta(record, 1, '{"s":1}'))
        store = storage.contexts
        assert isinstance(store, contexts.PostgresContextStore)
        assert list(store._heads) == [r.context_id for r in records[1:]]
        assert store.append(_delta(records[0], 2, '{"s":2}'))  # forgotten: read, appended
    finally:
        storage.close()
