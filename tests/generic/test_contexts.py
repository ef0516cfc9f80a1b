"""DocumentContextStore on the memory document store (docs/protocol.md#contexts)."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    StaleWriterError,
    StorageError,
)
from reactor.generic.contexts import (
    CONTEXT_PAGES,
    CONTEXT_SEGMENTS,
    CONTEXTS,
    FENCE_FIELD,
    PAGE_UNTIL_FIELD,
    DocumentContextStore,
    context_page_key,
)
from reactor.generic.storage import GenericStorage
from reactor.memory import ManualClock, MemoryDocumentStore, MemoryProbe, MemoryStorage
from reactor.model.records import ContextDelta, Fence
from reactor.ports import Capabilities, ContextRecord, StepResultRecord
from reactor.ports.serialization import record_to_dict

TTL = 100.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def storage(clock: ManualClock) -> MemoryStorage:
    return MemoryStorage(clock=clock, context_ttl=TTL)


def record(
    context_id: str,
    *,
    status: str = "running",
    created_at: float = 1.0,
    parent: str | None = None,
    dispatched: bool = False,
    document: str = '{"v": 1}',
    reactor: str = "Orders",
) -> ContextRecord:
    return ContextRecord(
        context_id=context_id,
        reactor=reactor,
        status=status,
        document=document,
        created_at=created_at,
        updated_at=created_at + 1,
        parent_context_id=parent,
        root_context_id=parent,
        dispatched_child=dispatched,
    )


def test_save_then_load_round_trips_every_field(storage: MemoryStorage) -> None:
    rec = record("c1", parent="p", dispatched=True)
    storage.contexts.save(rec)
    assert storage.contexts.load("c1") == rec


def test_unknown_id_loads_none(storage: MemoryStorage) -> None:
    assert storage.contexts.load("nope") is None


def test_last_writer_wins_and_delete(storage: MemoryStorage) -> None:
    storage.contexts.save(record("c1", document="v1"))
    storage.contexts.save(record("c1", document="v2", status="completed"))
    loaded = storage.contexts.load("c1")
    assert loaded is not None and loaded.document == "v2" and loaded.status == "completed"
    assert storage.contexts.delete("c1") is True
    assert storage.contexts.load("c1") is None
    assert storage.contexts.delete("c1") is False
    assert storage.contexts.page().runs == ()


def test_scan_lists_top_level_runs_only(storage: MemoryStorage) -> None:
    storage.contexts.save(record("root"))
    storage.contexts.save(record("elem", parent="root"))  # map element / compose child
    storage.contexts.save(record("child", parent="root", dispatched=True))
    assert [r.context_id for r in storage.contexts.scan()] == ["root"]
    with_children = {
        r.context_id for r in storage.contexts.scan(include_dispatched_children=True)
    }
    assert with_children == {"root", "child"}


def test_scan_rows_carry_the_summary(storage: MemoryStorage) -> None:
    storage.contexts.save(record("root", status="failed", created_at=5.0))
    (row,) = storage.contexts.scan()
    assert (row.context_id, row.reactor, row.status, row.created_at, row.updated_at) == (
        "root", "Orders", "failed", 5.0, 6.0,
    )


def test_scan_status_filter_applies_before_limit(storage: MemoryStorage) -> None:
    for i in range(5):
        storage.contexts.save(record(f"a{i}", status="completed"))
    storage.contexts.save(record("z", status="running"))
    rows = storage.contexts.scan(statuses=["running"], limit=1)
    assert [r.context_id for r in rows] == ["z"]
    assert len(storage.contexts.scan(limit=3)) == 3
    assert storage.contexts.scan(limit=0) == []


def test_scan_follows_status_changes(storage: MemoryStorage) -> None:
    storage.contexts.save(record("r", status="running"))
    storage.contexts.save(record("r", status="completed"))
    assert storage.contexts.scan(statuses={"running"}) == []
    assert [r.context_id for r in storage.contexts.scan(statuses={"completed"})] == ["r"]


def test_scan_finds_unknown_statuses(storage: MemoryStorage) -> None:
    storage.contexts.save(record("legacy", status="skipped"))
    storage.contexts.save(record("other", status="weird"))
    assert {r.context_id for r in storage.contexts.scan()} == {"legacy", "other"}
    assert [r.context_id for r in storage.contexts.scan(statuses=["skipped"])] == ["legacy"]


def test_scan_never_returns_step_results(storage: MemoryStorage) -> None:
    storage.step_results.put(
        StepResultRecord("r", "s", "dispatched", "r", "Orders", 1.0, 1.0)
    )
    assert storage.contexts.scan() == []
    assert storage.contexts.page().runs == ()


def test_map_elements_are_not_indexed(storage: MemoryStorage) -> None:
    for i in range(20):
        storage.contexts.save(record(f"e{i}", parent="root"))
    raw = storage.documents.raw(CONTEXTS, "e0")
    assert raw is not None and raw.index is None
    assert storage.documents.keys(CONTEXT_PAGES) == []


def test_page_returns_every_run_once_newest_first(storage: MemoryStorage) -> None:
    storage.contexts.save(record("old", created_at=1.0))
    storage.contexts.save(record("mid", created_at=2.0))
    storage.contexts.save(record("new", created_at=3.0))
    storage.contexts.save(record("kid", created_at=4.0, parent="new", dispatched=True))
    first = storage.contexts.page(limit=2)
    assert [r.context_id for r in first.runs] == ["new", "mid"]
    assert first.next_cursor is not None
    second = storage.contexts.page(cursor=first.next_cursor, limit=2)
    assert [r.context_id for r in second.runs] == ["old"]
    assert second.next_cursor is None


def test_page_exactly_full_has_no_next_cursor(storage: MemoryStorage) -> None:
    storage.contexts.save(record("a", created_at=1.0))
    storage.contexts.save(record("b", created_at=2.0))
    page = storage.contexts.page(limit=2)
    assert len(page.runs) == 2 and page.next_cursor is None


def test_page_ties_on_created_at_list_each_run_once(storage: MemoryStorage) -> None:
    ids = [f"r{i}" for i in range(7)]
    for run_id in ids:
        storage.contexts.save(record(run_id, created_at=10.0))
    seen: list[str] = []
    cursor = None
    while True:
        page = storage.contexts.page(cursor=cursor, limit=3)
        seen.extend(r.context_id for r in page.runs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == ids and len(seen) == len(ids)


def test_page_summary_follows_saves(storage: MemoryStorage) -> None:
    storage.contexts.save(record("a", status="running"))
    storage.contexts.save(record("a", status="completed"))
    (row,) = storage.contexts.page().runs
    assert row.status == "completed"


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",
        "not base64 at all?",
        base64.urlsafe_b64encode(b"no-digits").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "",
    ],
)
def test_page_rejects_malformed_cursors(storage: MemoryStorage, cursor: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        storage.contexts.page(cursor=cursor)


def test_page_rejects_a_zero_limit(storage: MemoryStorage) -> None:
    with pytest.raises(ValueError):
        storage.contexts.page(limit=0)


def test_save_stamps_retention_and_every_save_restamps(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    probe = MemoryProbe(storage)
    storage.contexts.save(record("r"))
    assert probe.ttl(CONTEXTS, "r") == pytest.approx(TTL)
    clock.advance(TTL - 1)
    storage.contexts.save(record("r", status="paused"))
    clock.advance(2)  # past the first write's expiry, within the second's
    assert storage.contexts.load("r") is not None
    assert [r.context_id for r in storage.contexts.scan()] == ["r"]
    clock.advance(TTL)
    assert storage.contexts.load("r") is None
    assert storage.contexts.scan() == []
    assert storage.contexts.page().runs == ()


def test_an_expired_context_is_replaced_by_a_new_save(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    storage.contexts.save(record("r", document="old"))
    clock.advance(TTL)
    found = storage.documents.read(CONTEXTS, "r")
    assert found.value is None and found.version is not None  # logically expired, stored
    storage.contexts.save(record("r", document="new"))
    loaded = storage.contexts.load("r")
    assert loaded is not None and loaded.document == "new"


def test_a_too_large_context_is_refused_before_any_write(clock: ManualClock) -> None:
    docs = MemoryDocumentStore(clock=clock)
    storage = GenericStorage(docs, capabilities=Capabilities(max_document_bytes=8))
    with pytest.raises(ContextTooLargeError) as info:
        storage.contexts.save(record("big", document="x" * 9))
    assert (info.value.size_bytes, info.value.limit_bytes) == (9, 8)
    assert storage.contexts.load("big") is None
    storage.contexts.save(record("small", document="x" * 8))
    assert storage.contexts.load("small") is not None


def test_top_level_runs_get_a_page_document_under_context_page_key(
    storage: MemoryStorage,
) -> None:
    from reactor.generic.contexts import context_page_key

    record = ContextRecord("run-1", "R", "running", "{}", 1_700_000_000.25, 1_700_000_001.0)
    storage.contexts.save(record)
    key = context_page_key(record.created_at, "run-1")
    page = storage.documents.raw(CONTEXT_PAGES, key)
    assert page is not None and page.value["context_id"] == "run-1"
    child = ContextRecord("el-1", "E", "running", "{}", 1.0, 1.0, parent_context_id="run-1")
    storage.contexts.save(child)
    assert storage.documents.raw(CONTEXT_PAGES, context_page_key(1.0, "el-1")) is None


class _PageWritesFail:
    """A :class:`MemoryDocumentStore` whose writes to the page collection raise while armed:
    a writer killed between a run's context write and its summary write."""

    def __init__(self, docs: MemoryDocumentStore) -> None:
        self.docs = docs
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.docs, name)

    def write(self, collection: str, key: str, value: Any, **kwargs: Any) -> bool:
        if self.armed and collection == CONTEXT_PAGES:
            raise StorageError("killed between the context write and the summary write")
        return self.docs.write(collection, key, value, **kwargs)


def test_a_crash_after_the_final_context_write_never_leaves_the_listing_unfinished(
    clock: ManualClock,
) -> None:
    docs = _PageWritesFail(MemoryDocumentStore(clock=clock))
    storage = GenericStorage(docs, capabilities=Capabilities())  # type: ignore[arg-type]
    storage.contexts.save(record("a", status="running"))
    docs.armed = True
    finished = dataclasses.replace(record("a", status="completed"), updated_at=9.0)
    with pytest.raises(StorageError):
        storage.contexts.save(finished)
    assert storage.contexts.load("a").status == "completed"  # type: ignore[union-attr]
    docs.armed = False
    (row,) = storage.contexts.page().runs
    assert (row.status, row.updated_at) == ("completed", 9.0)
    # ... and the summary itself was repaired, so later pages read it as stored
    stored = docs.docs.raw(CONTEXT_PAGES, context_page_key(1.0, "a"))
    assert stored is not None and stored.value["status"] == "completed"


def test_a_summary_whose_context_is_gone_is_dropped_from_the_listing(
    storage: MemoryStorage,
) -> None:
    storage.contexts.save(record("a", status="running"))
    storage.contexts.save(record("b", status="running", created_at=2.0))
    storage.documents.write(CONTEXTS, "a", None, expected_version=storage.documents.read(
        CONTEXTS, "a").version, expires_at=None)
    assert [r.context_id for r in storage.contexts.page().runs] == ["b"]
    assert storage.documents.raw(CONTEXT_PAGES, context_page_key(1.0, "a")) is None


def test_listing_repair_never_moves_a_summary_backwards(clock: ManualClock) -> None:
    docs = _PageWritesFail(MemoryDocumentStore(clock=clock))
    storage = GenericStorage(docs, capabilities=Capabilities())  # type: ignore[arg-type]
    storage.contexts.save(record("a", status="running"))
    key = context_page_key(1.0, "a")
    # a newer summary than the context (the writer's next save landed in between) is kept
    newer = dict(docs.docs.raw(CONTEXT_PAGES, key).value, updated_at=50.0)  # type: ignore[union-attr]
    docs.docs.write(CONTEXT_PAGES, key, newer,
                    expected_version=docs.docs.read(CONTEXT_PAGES, key).version, expires_at=None)
    (row,) = storage.contexts.page().runs
    assert row.status == "running"
    assert docs.docs.raw(CONTEXT_PAGES, key).value["updated_at"] == 50.0  # type: ignore[union-attr]


# ------------------------------------------------------------------ incremental checkpoints


def _append(storage: MemoryStorage, clock: ManualClock, context_id: str, position: int) -> None:
    """Append segment ``position`` to base ``b`` of a running context, stamped now."""
    assert storage.contexts.append(ContextDelta(
        context_id=context_id, base="b", position=position, status="running",
        updated_at=clock(), segment=f'"{position}"'))


def _pieces(storage: MemoryStorage, context_id: str) -> list[tuple[str, Any]]:
    """The stored pieces (base documents and segments) of a run."""
    found = storage.documents.scan(CONTEXT_SEGMENTS, after=context_id + "/")
    return [(key, value) for key, value in found if key.startswith(context_id + "/")]


def _legacy_head(rec: ContextRecord) -> dict[str, Any]:
    """A context document as the store wrote it before incremental checkpoints: the whole
    record inline, no pieces, no base."""
    return {
        "context_id": rec.context_id, "reactor": rec.reactor, "status": rec.status,
        "document": rec.document, "created_at": rec.created_at, "updated_at": rec.updated_at,
        "parent_context_id": rec.parent_context_id, "root_context_id": rec.root_context_id,
        "dispatched_child": rec.dispatched_child, "_fence": 7,
    }


def test_a_context_written_before_segments_loads_and_takes_no_append(
    storage: MemoryStorage,
) -> None:
    old = record("legacy")
    storage.documents.write(CONTEXTS, "legacy", _legacy_head(old), expected_version=None,
                            expires_at=None, index="running")
    assert storage.contexts.load("legacy") == old
    delta = ContextDelta(context_id="legacy", base="b", position=1, status="completed",
                         updated_at=9.0, segment='{"head":{}}')
    assert storage.contexts.append(delta) is False
    assert storage.contexts.load("legacy") == old
    whole = dataclasses.replace(old, base="b", document='{"v": 2}')
    storage.contexts.save(whole, fence=Fence(key="async:legacy", owner="o", token=7))
    assert storage.contexts.load("legacy") == whole
    assert storage.contexts.append(delta, fence=Fence(key="async:legacy", owner="o", token=7))
    loaded = storage.contexts.load("legacy")
    assert loaded is not None and loaded.segments == ('{"head":{}}',)


def test_a_missing_piece_makes_the_run_unreadable_not_wrong(storage: MemoryStorage) -> None:
    rec = dataclasses.replace(record("holed"), base="b", segments=('{"s":1}', '{"s":2}'))
    storage.contexts.save(rec)
    pieces = _pieces(storage, "holed")
    middle = next(key for key, value in pieces if value["text"] == '{"s":1}')
    version = storage.documents.read(CONTEXT_SEGMENTS, middle).version
    assert storage.documents.write(CONTEXT_SEGMENTS, middle, None, expected_version=version,
                                   expires_at=None)
    with pytest.raises(DeserializationError, match="holed"):
        storage.contexts.load("holed")


def test_a_refused_fenced_save_leaves_no_pieces(storage: MemoryStorage) -> None:
    rec = dataclasses.replace(record("fenced"), base="b1")
    storage.contexts.save(rec, fence=Fence(key="async:fenced", owner="o", token=5))
    before = _pieces(storage, "fenced")
    stale = dataclasses.replace(rec, base="b2", segments=('{"s":1}',))
    with pytest.raises(StaleWriterError):
        storage.contexts.save(stale, fence=Fence(key="async:fenced", owner="o", token=4))
    assert _pieces(storage, "fenced") == before
    assert storage.contexts.load("fenced") == rec


def test_a_live_runs_pieces_and_page_are_renewed_before_they_lapse(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    rec = dataclasses.replace(record("long", created_at=clock()), base="b")
    storage.contexts.save(rec)
    for position in range(1, 8):  # an append every 0.3 TTL: the run outlives 2 TTLs
        clock.advance(TTL * 0.3)
        delta = ContextDelta(context_id="long", base="b", position=position,
                             status="running", updated_at=clock(), segment=f'"{position}"')
        assert storage.contexts.append(delta)
    loaded = storage.contexts.load("long")
    assert loaded is not None and len(loaded.segments) == 7
    assert [r.context_id for r in storage.contexts.page().runs] == ["long"]


def test_a_save_after_appends_drops_the_old_pieces(storage: MemoryStorage) -> None:
    rec = dataclasses.replace(record("compact"), base="b1")
    storage.contexts.save(rec)
    for position in (1, 2):
        storage.contexts.append(ContextDelta(context_id="compact", base="b1",
                                             position=position, status="running",
                                             updated_at=3.0, segment="{}"))
    storage.contexts.save(dataclasses.replace(rec, base="b2"))
    assert len(_pieces(storage, "compact")) == 1  # the new base
    assert storage.contexts.delete("compact")
    assert _pieces(storage, "compact") == []


def test_pieces_and_page_outlive_every_head_between_writes(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    rec = dataclasses.replace(record("idle", created_at=clock()), base="b")
    storage.contexts.save(rec)
    clock.advance(TTL * 0.4)
    delta = ContextDelta(context_id="idle", base="b", position=1, status="running",
                         updated_at=clock(), segment='"1"')
    assert storage.contexts.append(delta)  # the head now lives until 1.4 TTL
    clock.advance(TTL * 0.99)  # idle: just before the head expires
    loaded = storage.contexts.load("idle")
    assert loaded is not None and loaded.segments == ('"1"',)
    assert [r.context_id for r in storage.contexts.page().runs] == ["idle"]


def test_a_load_racing_a_whole_save_reads_the_new_chain(storage: MemoryStorage) -> None:
    rec = dataclasses.replace(record("raced"), base="b1", segments=('"old"',))
    storage.contexts.save(rec)
    store = storage.contexts
    real_chain = store._chain  # type: ignore[attr-defined]
    raced: list[int] = []

    def chain(*args: Any) -> list[str]:
        if not raced:  # a whole save lands between the reader's head read and its piece read
            raced.append(1)
            store.save(dataclasses.replace(rec, base="b2", segments=('"new"',)))
        return list(real_chain(*args))

    store._chain = chain  # type: ignore[attr-defined]
    loaded = store.load("raced")
    assert loaded is not None and (loaded.base, loaded.segments) == ("b2", ('"new"',))


def test_a_stalled_writer_never_drops_the_chain_of_a_newer_one(storage: MemoryStorage) -> None:
    rec = dataclasses.replace(record("stalled"), base="b0")
    storage.contexts.save(rec, fence=Fence(key="async:stalled", owner="old", token=1))
    store = storage.contexts
    real_drop = store._drop_pieces  # type: ignore[attr-defined]
    newer = dataclasses.replace(rec, base="b2", document='{"v": "newer"}')
    stalled: list[int] = []

    def drop(prefix: str, *, keep: set[str]) -> None:
        if not stalled:  # the old writer stalls after its head write; the new holder saves
            stalled.append(1)
            store.save(newer, fence=Fence(key="async:stalled", owner="new", token=2))
        real_drop(prefix, keep=keep)

    store._drop_pieces = drop  # type: ignore[attr-defined]
    store.save(dataclasses.replace(rec, base="b1"),
               fence=Fence(key="async:stalled", owner="old", token=1))
    assert store.load("stalled") == newer


def test_loads_never_read_through_a_secondary_index(clock: ManualClock) -> None:
    class NoIndexedPieces(MemoryDocumentStore):
        """Indexed scans lag writes on some backends (DynamoDB's GSIs): refuse them here."""

        def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
                 limit: int = 1000) -> list[tuple[str, Any]]:
            assert not (collection == CONTEXT_SEGMENTS and index is not None)
            return list(super().scan(collection, index=index, after=after, limit=limit))

    storage = GenericStorage(NoIndexedPieces(clock=clock), context_ttl=TTL,
                             capabilities=Capabilities())
    rec = dataclasses.replace(record("consistent"), base="b", segments=('"1"',))
    storage.contexts.save(rec)
    assert storage.contexts.append(ContextDelta(context_id="consistent", base="b", position=2,
                                                status="running", updated_at=3.0,
                                                segment='"2"'))
    loaded = storage.contexts.load("consistent")
    assert loaded is not None and loaded.segments == ('"1"', '"2"')
    assert storage.contexts.delete("consistent")


@pytest.mark.parametrize("how", ["whole saves", "appends"])
def test_a_finished_runs_summary_expires_with_its_run(
    storage: MemoryStorage, clock: ManualClock, how: str
) -> None:
    """A run finished by a whole save (e.g. one refused by input validation) or by an append
    leaves no summary behind once its context expired (docs/workers.md, "Run listings after a
    crash"): the listing never shows a run that ``load`` does not return."""
    rec = dataclasses.replace(record("done", created_at=clock()), base="b")
    storage.contexts.save(rec)
    clock.advance(1)
    if how == "whole saves":
        storage.contexts.save(dataclasses.replace(rec, status="failed"))
    else:
        assert storage.contexts.append(ContextDelta(
            context_id="done", base="b", position=1, status="failed", updated_at=clock(),
            segment="{}",
        ))
    key = context_page_key(rec.created_at, "done")
    stored = storage.documents.raw(CONTEXT_PAGES, key)
    assert stored is not None and stored.value["status"] == "failed"  # written, not repaired
    assert [r.status for r in storage.contexts.page().runs] == ["failed"]
    clock.advance(TTL + 1)
    assert storage.contexts.load("done") is None
    assert storage.contexts.page().runs == ()
    assert storage.documents.read(CONTEXT_PAGES, key).value is None  # expired, not hidden


def test_a_run_stored_finished_by_its_first_save_gets_a_summary_that_expires(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    storage.contexts.save(record("refused", status="failed", created_at=clock()))
    clock.advance(10 * TTL)
    assert storage.contexts.load("refused") is None
    assert storage.contexts.page().runs == ()


def test_a_finished_summary_written_without_expiry_is_checked_against_its_run(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """Summaries an older release wrote for finished runs (no expiry, no marker) are checked
    once against their run: dropped when it is gone, else kept and from then on expiring."""
    storage.contexts.save(record("live", status="completed", created_at=clock()))
    for run_id, created_at in (("live", clock()), ("gone", clock() + 1)):
        key = context_page_key(created_at, run_id)
        old = {**record_to_dict(record(run_id, status="completed", created_at=created_at))}
        summary = {k: old[k] for k in ("context_id", "reactor", "status", "created_at",
                                        "updated_at", "parent_context_id")}
        stored = storage.documents.read(CONTEXT_PAGES, key)
        storage.documents.write(CONTEXT_PAGES, key, summary, expected_version=stored.version,
                                expires_at=None)
    assert [r.context_id for r in storage.contexts.page().runs] == ["live"]
    assert storage.documents.raw(CONTEXT_PAGES, context_page_key(clock() + 1, "gone")) is None
    clock.advance(TTL + 1)  # the live run expires; its summary now expires with it
    assert storage.contexts.page().runs == ()


def test_an_unreadable_stored_fence_counts_as_none_and_an_unfenced_save_drops_it(
    storage: MemoryStorage,
) -> None:
    old = record("junkfence")
    storage.documents.write(CONTEXTS, "junkfence", {**_legacy_head(old), "_fence": "junk"},
                            expected_version=None, expires_at=None, index="running")
    storage.contexts.save(dataclasses.replace(old, base="b", document='{"v": 2}'))
    head = storage.documents.read(CONTEXTS, "junkfence").value
    assert head is not None and "_fence" not in head  # read as 0: nothing to keep
    storage.contexts.save(dataclasses.replace(old, base="b2"),
                          fence=Fence(key="async:junkfence", owner="o", token=1))
    head = storage.documents.read(CONTEXTS, "junkfence").value
    assert head is not None and head["_fence"] == 1


def test_a_chain_shorter_than_its_head_counts_is_named_in_the_error(
    storage: MemoryStorage,
) -> None:
    rec = dataclasses.replace(record("short"), base="b", segments=('{"s":1}',))
    storage.contexts.save(rec)
    current = storage.documents.read(CONTEXTS, "short")
    assert current.value is not None
    storage.documents.write(CONTEXTS, "short", {**current.value, "_count": 2},
                            expected_version=current.version, expires_at=None, index="running")
    with pytest.raises(DeserializationError,
                       match=r"stored run 'short' has 1 of its 2 segments"):
        storage.contexts.load("short")


def test_a_load_whose_chain_breaks_at_every_attempt_raises_the_last_break(
    storage: MemoryStorage,
) -> None:
    rec = dataclasses.replace(record("churn"), base="b1")
    storage.contexts.save(rec)
    store = storage.contexts
    saves = [0]

    def chain(*args: Any) -> list[str]:  # a whole save lands before every piece read
        saves[0] += 1
        store.save(dataclasses.replace(rec, base=f"b{saves[0] + 1}"))
        raise DeserializationError(f"stored run 'churn' lost piece {saves[0]}")

    store._chain = chain  # type: ignore[attr-defined]
    with pytest.raises(DeserializationError, match="lost piece 3"):
        store.load("churn")
    assert saves[0] == 3


def test_an_append_whose_chain_was_replaced_under_it_reports_not_appended(
    storage: MemoryStorage,
) -> None:
    rec = dataclasses.replace(record("moved"), base="b")
    storage.contexts.save(rec)
    store = storage.contexts
    real_write_piece = store._write_piece  # type: ignore[attr-defined]
    rival = dataclasses.replace(rec, document='{"v": "rival"}')  # same base, no segments
    raced: list[int] = []

    def write_piece(key: str, text: str, *, prev: str) -> None:
        real_write_piece(key, text, prev=prev)
        if not raced:  # another writer re-saves the run between the piece and the head
            raced.append(1)
            store.save(rival)

    store._write_piece = write_piece  # type: ignore[attr-defined]
    delta = ContextDelta(context_id="moved", base="b", position=1, status="running",
                         updated_at=3.0, segment='{"s":1}')
    assert store.append(delta) is False  # the caller saves whole instead
    assert store.load("moved") == rival


# ------------------------------------------------------------------ summaries, pieces and races


class _Hooked:
    """A :class:`MemoryDocumentStore` with hooks: writes to the collections in ``failing``
    raise (a writer killed there); ``after_context_read`` runs once, right after the next read
    of a context document (another writer acting between a reader's reads); reads and scans
    are counted per collection."""

    def __init__(self, docs: MemoryDocumentStore) -> None:
        self.docs = docs
        self.failing: set[str] = set()
        self.after_context_read: Callable[[], object] | None = None
        self.reads: dict[str, int] = {}
        self.scans: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.docs, name)

    def read(self, collection: str, key: str) -> Any:
        self.reads[collection] = self.reads.get(collection, 0) + 1
        found = self.docs.read(collection, key)
        hook = self.after_context_read
        if hook is not None and collection == CONTEXTS:
            self.after_context_read = None
            hook()
        return found

    def write(self, collection: str, key: str, value: Any, **kwargs: Any) -> bool:
        if collection in self.failing:
            raise StorageError(f"killed at the write of {collection}/{key}")
        return self.docs.write(collection, key, value, **kwargs)

    def scan(self, collection: str, **kwargs: Any) -> Any:
        self.scans[collection] = self.scans.get(collection, 0) + 1
        return self.docs.scan(collection, **kwargs)


def _hooked_storage(clock: ManualClock) -> tuple[_Hooked, GenericStorage]:
    docs = _Hooked(MemoryDocumentStore(clock=clock))
    storage = GenericStorage(docs, context_ttl=TTL, capabilities=Capabilities())
    return docs, storage


@pytest.mark.parametrize("marker", ["absent", False, 1])
def test_an_old_finished_summary_is_marked_to_expire_with_its_run_once_checked(
    storage: MemoryStorage, clock: ManualClock, marker: Any
) -> None:
    """A terminal summary not marked exactly ``True`` (an older release's, or a marker some
    backend decoded as another JSON value) is re-stamped by the listing's check: marked
    ``True`` and expiring ``context_ttl`` from now, not kept forever."""
    storage.contexts.save(record("live", status="completed", created_at=clock()))
    key = context_page_key(clock(), "live")
    current = storage.documents.read(CONTEXT_PAGES, key)
    assert current.value is not None
    old = {k: v for k, v in current.value.items() if k != "_with_run"}
    if marker != "absent":
        old["_with_run"] = marker
    assert storage.documents.write(CONTEXT_PAGES, key, old, expected_version=current.version,
                                   expires_at=None)
    clock.advance(5)
    assert [r.context_id for r in storage.contexts.page().runs] == ["live"]
    stored = storage.documents.raw(CONTEXT_PAGES, key)
    assert stored is not None and stored.value["_with_run"] is True
    assert stored.expires_at == pytest.approx(clock() + TTL)


def test_a_listing_racing_a_delete_of_an_old_finished_summarys_run_writes_nothing(
    clock: ManualClock,
) -> None:
    docs, storage = _hooked_storage(clock)
    storage.contexts.save(record("gone", status="completed", created_at=clock()))
    key = context_page_key(clock(), "gone")
    current = docs.docs.read(CONTEXT_PAGES, key)
    assert current.value is not None
    old = {k: v for k, v in current.value.items() if k != "_with_run"}  # an older release's
    assert docs.docs.write(CONTEXT_PAGES, key, old, expected_version=current.version,
                           expires_at=None)
    # the run (and its summary) is deleted between the listing's read of it and its re-stamp
    docs.after_context_read = lambda: storage.contexts.delete("gone")
    assert [r.context_id for r in storage.contexts.page().runs] == ["gone"]
    assert docs.docs.keys(CONTEXT_PAGES) == []  # not resurrected
    assert storage.contexts.page().runs == ()


@pytest.mark.parametrize("next_updated_at", [3.0, 4.0])
def test_a_listing_repair_keeps_a_summary_written_after_it_read_the_run(
    clock: ManualClock, next_updated_at: float
) -> None:
    """The listing reads a stale summary and its run; the writer's next save (as new as the
    run the listing read, or newer) lands before the repair: its summary is kept."""
    docs, storage = _hooked_storage(clock)
    storage.contexts.save(record("a", status="running"))  # updated_at 2.0
    docs.failing = {CONTEXT_PAGES}
    with pytest.raises(StorageError):  # killed between the context write and the summary's
        storage.contexts.save(dataclasses.replace(record("a", status="paused"), updated_at=3.0))
    docs.failing = set()
    resumed = dataclasses.replace(record("a", status="running"), updated_at=next_updated_at)
    docs.after_context_read = lambda: storage.contexts.save(resumed)
    (row,) = storage.contexts.page().runs
    assert (row.status, row.updated_at) == ("paused", 3.0)  # what the listing read
    stored = docs.docs.raw(CONTEXT_PAGES, context_page_key(1.0, "a"))
    assert stored is not None
    assert (stored.value["status"], stored.value["updated_at"]) == ("running", next_updated_at)
    (row,) = storage.contexts.page().runs
    assert (row.status, row.updated_at) == ("running", next_updated_at)


@pytest.mark.parametrize("created_at", [0.5, 5.0])
def test_a_listing_never_repairs_a_summary_under_another_key_than_its_runs(
    clock: ManualClock, created_at: float
) -> None:
    """A run re-created with another ``created_at`` by a save killed before it moved the
    summary: the row under the old key is not this run's any more and is left as stored."""
    docs, storage = _hooked_storage(clock)
    storage.contexts.save(record("a", status="running", created_at=1.0))
    old_key = context_page_key(1.0, "a")
    before = docs.docs.raw(CONTEXT_PAGES, old_key)
    docs.failing = {CONTEXT_PAGES}
    with pytest.raises(StorageError):
        storage.contexts.save(record("a", status="paused", created_at=created_at))
    docs.failing = set()
    (row,) = storage.contexts.page().runs
    assert (row.status, row.created_at) == ("running", 1.0)
    after = docs.docs.raw(CONTEXT_PAGES, old_key)
    assert before is not None and after is not None
    assert (after.value, after.version) == (before.value, before.version)


@pytest.mark.parametrize(("old_base", "new_base"), [("b1", "b2"), ("b2", "b1")])
def test_a_save_under_another_base_drops_the_orphans_of_failed_appends(
    clock: ManualClock, old_base: str, new_base: str
) -> None:
    docs, storage = _hooked_storage(clock)
    rec = dataclasses.replace(record("orphans"), base=old_base)
    storage.contexts.save(rec)
    docs.failing = {CONTEXTS}  # the append writes its piece, then dies before the head
    with pytest.raises(StorageError):
        storage.contexts.append(ContextDelta(context_id="orphans", base=old_base, position=1,
                                             status="running", updated_at=3.0, segment="{}"))
    docs.failing = set()
    assert len([k for k in docs.docs.keys(CONTEXT_SEGMENTS) if k.startswith("orphans/")]) == 2
    storage.contexts.save(dataclasses.replace(rec, base=new_base))
    left = [k for k in docs.docs.keys(CONTEXT_SEGMENTS) if k.startswith("orphans/")]
    assert len(left) == 1 and left[0].startswith(f"orphans/{new_base}/")
    assert storage.contexts.load("orphans") == dataclasses.replace(rec, base=new_base)


def test_a_load_lists_the_runs_pieces_in_one_scan(clock: ManualClock) -> None:
    docs, storage = _hooked_storage(clock)
    rec = dataclasses.replace(record("one"), base="b", segments=('"1"', '"2"', '"3"'))
    storage.contexts.save(rec)
    storage.contexts.save(dataclasses.replace(record("one2"), base="b"))  # pieces after its
    docs.scans.clear()
    assert storage.contexts.load("one") == rec
    assert docs.scans.get(CONTEXT_SEGMENTS) == 1


def test_a_same_status_append_rewrites_the_summary_only_when_it_would_lapse_first(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """The summary of an unfinished run is written with twice ``context_ttl`` and rewritten
    only by the write whose head would outlive it (docs/protocol.md#contexts)."""
    start = clock()
    storage.contexts.save(dataclasses.replace(record("quiet", created_at=start), base="b"))
    key = context_page_key(start, "quiet")
    first = storage.documents.raw(CONTEXT_PAGES, key)
    assert first is not None and first.expires_at == pytest.approx(start + 2 * TTL)

    clock.advance(TTL * 0.5)
    # the head lives until 1.5 TTL: the summary (2 TTL) outlives it
    _append(storage, clock, "quiet", 1)
    kept = storage.documents.raw(CONTEXT_PAGES, key)
    assert kept is not None and (kept.version, kept.expires_at) == (first.version,
                                                                    first.expires_at)
    clock.advance(TTL * 0.6)
    # the head lives until 2.1 TTL: the summary is rewritten
    _append(storage, clock, "quiet", 2)
    renewed = storage.documents.raw(CONTEXT_PAGES, key)
    assert renewed is not None and renewed.version != first.version
    assert renewed.expires_at == pytest.approx(clock() + 2 * TTL)


def test_an_append_renews_the_pieces_only_when_they_would_lapse_before_the_head(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """Pieces are re-stamped once per ``context_ttl`` of a run's life, not by every append."""
    start = clock()
    storage.contexts.save(dataclasses.replace(record("pieces", created_at=start), base="b"))
    ((base_key, _),) = _pieces(storage, "pieces")
    first = storage.documents.raw(CONTEXT_SEGMENTS, base_key)
    assert first is not None and first.expires_at == pytest.approx(start + 2 * TTL)

    clock.advance(TTL * 0.1)
    # the head lives until 1.1 TTL: the pieces (2 TTL) outlive it
    _append(storage, clock, "pieces", 1)
    kept = storage.documents.raw(CONTEXT_SEGMENTS, base_key)
    assert kept is not None and (kept.version, kept.expires_at) == (first.version,
                                                                    first.expires_at)
    clock.advance(TTL * 0.95)
    # the head lives until 2.05 TTL: every piece is re-stamped first
    _append(storage, clock, "pieces", 2)
    for key, _ in _pieces(storage, "pieces"):
        renewed = storage.documents.raw(CONTEXT_SEGMENTS, key)
        assert renewed is not None and renewed.expires_at == pytest.approx(clock() + 2 * TTL)


def test_contexts_within_the_document_limit_are_stored(clock: ManualClock) -> None:
    """Only a context over ``max_document_bytes`` is refused: one under the limit or exactly at
    it (here above 256 bytes, where ints stop being shared objects) is saved and appended."""
    docs = MemoryDocumentStore(clock=clock)
    storage = GenericStorage(docs, capabilities=Capabilities(max_document_bytes=1000))
    small = dataclasses.replace(record("small", document="x" * 10), base="b")
    storage.contexts.save(small)
    assert storage.contexts.append(ContextDelta(
        context_id="small", base="b", position=1, status="running", updated_at=clock(),
        segment="y" * 20))
    loaded = storage.contexts.load("small")
    assert loaded is not None and loaded.stored_bytes == 30
    storage.contexts.save(record("full", document="x" * 1000))
    full = storage.contexts.load("full")
    assert full is not None and full.stored_bytes == 1000
    with pytest.raises(ContextTooLargeError):
        storage.contexts.save(record("over", document="x" * 1001))


def test_a_head_without_a_page_expiry_rewrites_its_summary_on_its_next_write(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """A head written before page summaries were stamped to outlive their heads (no
    ``_page_until``) has its summary rewritten by its next write, status unchanged, so the
    listing keeps the run for as long as the run lives."""
    start = clock()
    storage.contexts.save(dataclasses.replace(record("old", created_at=start), base="b"))
    head = storage.documents.read(CONTEXTS, "old")
    assert head.value is not None and PAGE_UNTIL_FIELD in head.value
    legacy = {k: v for k, v in head.value.items() if k != PAGE_UNTIL_FIELD}
    assert storage.documents.write(CONTEXTS, "old", legacy, expected_version=head.version,
                                   expires_at=head.expires_at, index="running")
    key = context_page_key(start, "old")
    assert storage.documents.set_expiry(CONTEXT_PAGES, key, start + TTL)  # as stamped then

    clock.advance(TTL * 0.5)
    _append(storage, clock, "old", 1)
    summary = storage.documents.raw(CONTEXT_PAGES, key)
    assert summary is not None and summary.expires_at == pytest.approx(clock() + 2 * TTL)
    clock.advance(TTL * 0.9)  # past the summary's former expiry, within the head's
    assert [run.context_id for run in storage.contexts.page().runs] == ["old"]


def test_scan_returns_at_most_1000_rows_by_default(storage: MemoryStorage) -> None:
    """``ContextStore.scan``'s default ``limit`` is 1000 (docs/protocol.md, "Contexts")."""
    for n in range(1001):
        storage.contexts.save(record(f"r{n:04d}"))
    first = storage.contexts.scan()
    assert len(first) == 1000 and first.next_cursor is not None
    rest = storage.contexts.scan(cursor=first.next_cursor)
    assert [row.context_id for row in rest] == ["r1000"]


def test_an_append_past_the_document_limit_is_refused(clock: ManualClock) -> None:
    """The stored size an append is checked against is the base plus every segment, the new
    one included (docs/protocol.md, "Incremental checkpoints"): an append reaching the limit
    is stored, one passing it raises ``ContextTooLargeError`` and counts nothing."""
    docs = MemoryDocumentStore(clock=clock)
    storage = GenericStorage(docs, capabilities=Capabilities(max_document_bytes=100))
    storage.contexts.save(dataclasses.replace(record("grow", document="x" * 60), base="b"))

    def delta(position: int, size: int) -> ContextDelta:
        return ContextDelta(context_id="grow", base="b", position=position,
                            status="running", updated_at=clock(), segment="y" * size)

    assert storage.contexts.append(delta(1, 30))  # 90 bytes
    with pytest.raises(ContextTooLargeError) as info:
        storage.contexts.append(delta(2, 11))
    assert (info.value.size_bytes, info.value.limit_bytes) == (101, 100)
    assert storage.contexts.append(delta(2, 10))  # exactly 100 bytes
    loaded = storage.contexts.load("grow")
    assert loaded is not None and loaded.segments == ("y" * 30, "y" * 10)
    assert loaded.stored_bytes == 100


def test_a_save_under_the_same_base_drops_the_whole_chain_it_replaced(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """A record saved back under its own base replaces the stored document and segments
    (docs/protocol.md, "Incremental checkpoints"): every piece of the replaced chain goes,
    not only its newest."""
    rec = dataclasses.replace(record("resaved"), base="b")
    storage.contexts.save(rec)
    for position in (1, 2):
        _append(storage, clock, "resaved", position)
    assert len(_pieces(storage, "resaved")) == 3
    again = dataclasses.replace(rec, document='{"v": 2}')
    storage.contexts.save(again)
    assert [value["text"] for _, value in _pieces(storage, "resaved")] == ['{"v": 2}']
    assert storage.contexts.load("resaved") == again


def test_a_lost_base_piece_makes_the_run_unreadable_not_wrong(storage: MemoryStorage) -> None:
    """The oldest piece of the chain (the base document) gone under a live head: the load
    raises ``DeserializationError`` naming the run, it never returns a record without its
    document."""
    rec = dataclasses.replace(record("baseless"), base="b", segments=('{"s":1}',))
    storage.contexts.save(rec)
    base = next(key for key, value in _pieces(storage, "baseless") if value["prev"] == "")
    version = storage.documents.read(CONTEXT_SEGMENTS, base).version
    assert storage.documents.write(CONTEXT_SEGMENTS, base, None, expected_version=version,
                                   expires_at=None)
    with pytest.raises(DeserializationError, match="stored run 'baseless' lost piece"):
        storage.contexts.load("baseless")


def test_unfenced_saves_store_no_fence(storage: MemoryStorage) -> None:
    """The stored token is the largest one a fenced save carried (docs/protocol.md#contexts):
    unfenced saves, first or later, store none; a fenced one stores its token."""
    rec = dataclasses.replace(record("free"), base="b")
    storage.contexts.save(rec)
    first = storage.documents.read(CONTEXTS, "free").value
    assert first is not None and FENCE_FIELD not in first
    storage.contexts.save(dataclasses.replace(rec, status="paused"))
    second = storage.documents.read(CONTEXTS, "free").value
    assert second is not None and FENCE_FIELD not in second
    storage.contexts.save(rec, fence=Fence(key="async:free", owner="o", token=1))
    fenced = storage.documents.read(CONTEXTS, "free").value
    assert fenced is not None and fenced[FENCE_FIELD] == 1


def test_a_same_status_save_rewrites_the_summary_only_when_it_would_lapse_first(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """As for appends: a whole save that changes neither the status nor the page key leaves
    the run's summary as written until the head it writes would outlive it
    (docs/protocol.md#contexts)."""
    start = clock()
    rec = dataclasses.replace(record("steady", created_at=start), base="b")
    storage.contexts.save(rec)
    key = context_page_key(start, "steady")
    first = storage.documents.raw(CONTEXT_PAGES, key)
    assert first is not None and first.expires_at == pytest.approx(start + 2 * TTL)

    clock.advance(TTL * 0.5)
    storage.contexts.save(dataclasses.replace(rec, updated_at=clock()))
    kept = storage.documents.raw(CONTEXT_PAGES, key)
    assert kept is not None and (kept.version, kept.expires_at) == (first.version,
                                                                    first.expires_at)
    clock.advance(TTL * 0.6)
    storage.contexts.save(dataclasses.replace(rec, updated_at=clock()))
    renewed = storage.documents.raw(CONTEXT_PAGES, key)
    assert renewed is not None and renewed.version != first.version
    assert renewed.expires_at == pytest.approx(clock() + 2 * TTL)


# ------------------------------------------------------------------ more races and corruption


@pytest.mark.parametrize("new_base", ["b1", "b2", "b3"])
def test_a_load_racing_a_whole_save_reads_the_new_chain_whatever_its_piece_keys(
    clock: ManualClock, new_base: str
) -> None:
    """A whole save lands between a load's head read and its piece read: the load reads the
    head again and returns the new chain, whether the new newest piece's key sorts before the
    old one's (an earlier base, or the same base with fewer segments) or after it."""
    docs, storage = _hooked_storage(clock)
    rec = dataclasses.replace(record("raced"), base="b2", segments=('"1"', '"2"'))
    storage.contexts.save(rec)
    rival = dataclasses.replace(rec, base=new_base, document='{"v": "rival"}', segments=())
    docs.after_context_read = lambda: storage.contexts.save(rival)
    assert storage.contexts.load("raced") == rival


def test_a_load_whose_piece_is_really_lost_gives_up_once_its_head_did_not_move(
    clock: ManualClock,
) -> None:
    """A piece gone under a head that did not move is not coming back: the load reads the
    head again, sees it unchanged and raises, without reading the chain again."""
    docs, storage = _hooked_storage(clock)
    rec = dataclasses.replace(record("holed"), base="b", segments=('{"s":1}', '{"s":2}'))
    storage.contexts.save(rec)
    middle = next(key for key, value in _pieces(storage, "holed")  # type: ignore[arg-type]
                  if value["text"] == '{"s":1}')
    version = docs.docs.read(CONTEXT_SEGMENTS, middle).version
    assert docs.docs.write(CONTEXT_SEGMENTS, middle, None, expected_version=version,
                           expires_at=None)
    docs.reads.clear()
    docs.scans.clear()
    with pytest.raises(DeserializationError, match="holed"):
        storage.contexts.load("holed")
    assert (docs.reads.get(CONTEXTS), docs.scans.get(CONTEXT_SEGMENTS)) == (2, 1)


@pytest.mark.parametrize("updated_at", [1.5, 3.0])
def test_a_listing_dropping_a_gone_runs_summary_keeps_one_written_meanwhile(
    clock: ManualClock, updated_at: float
) -> None:
    """The listing finds a summary's run gone and drops the row; a save re-creating the run
    lands before the listing removes the summary: the summary it wrote (older or newer than
    the one the listing read) is kept, and the next page lists the run."""
    docs, storage = _hooked_storage(clock)
    storage.contexts.save(record("a", status="running"))  # updated_at 2.0
    head = docs.docs.read(CONTEXTS, "a")
    assert docs.docs.write(CONTEXTS, "a", None, expected_version=head.version, expires_at=None)
    again = dataclasses.replace(record("a", status="running"), updated_at=updated_at)
    docs.after_context_read = lambda: storage.contexts.save(again)
    assert storage.contexts.page().runs == ()
    stored = docs.docs.raw(CONTEXT_PAGES, context_page_key(1.0, "a"))
    assert stored is not None and stored.value["updated_at"] == updated_at
    (row,) = storage.contexts.page().runs
    assert (row.context_id, row.updated_at) == ("a", updated_at)


def test_a_listing_shows_a_finished_runs_summary_without_reading_the_run(
    clock: ManualClock,
) -> None:
    """Terminal summaries are shown as stored, so the listing's check costs one context read
    per unfinished run on the page (docs/workers.md, "Run listings after a crash")."""
    docs, storage = _hooked_storage(clock)
    storage.contexts.save(record("done", status="completed", created_at=1.0))
    storage.contexts.save(record("failed", status="failed", created_at=2.0))
    storage.contexts.save(record("live", status="running", created_at=3.0))
    docs.reads.clear()
    runs = storage.contexts.page().runs
    assert [(r.context_id, r.status) for r in runs] == [
        ("live", "running"), ("failed", "failed"), ("done", "completed"),
    ]
    assert docs.reads.get(CONTEXTS) == 1


def test_a_listing_leaves_the_summary_of_a_run_whose_status_did_not_change_as_written(
    storage: MemoryStorage, clock: ManualClock
) -> None:
    """A summary moves only with its run's status (module docstring of
    reactor.generic.contexts): the listing shows a same-status run's own ``updated_at`` without
    rewriting its summary, which keeps the expiry its head counts on, so the run stays listed
    for as long as it lives."""
    start = clock()
    storage.contexts.save(dataclasses.replace(record("quiet", created_at=start), base="b"))
    key = context_page_key(start, "quiet")
    written = storage.documents.raw(CONTEXT_PAGES, key)
    assert written is not None
    clock.advance(TTL * 0.5)
    _append(storage, clock, "quiet", 1)  # same status: the summary (2 TTL) is kept
    (row,) = storage.contexts.page().runs
    assert row.updated_at == clock()  # the run's own, not the summary's
    kept = storage.documents.raw(CONTEXT_PAGES, key)
    assert kept is not None and (kept.version, kept.expires_at) == (written.version,
                                                                    written.expires_at)
    clock.advance(TTL * 0.4)
    _append(storage, clock, "quiet", 2)  # the head lives until 1.9 TTL, the summary 2 TTL
    clock.advance(TTL * 0.7)  # 1.6 TTL: the head is live
    assert [r.context_id for r in storage.contexts.page().runs] == ["quiet"]


@pytest.mark.parametrize("created_at", [1.0, 9.0])
def test_a_run_re_saved_with_another_created_at_is_listed_once(
    storage: MemoryStorage, created_at: float
) -> None:
    """A save that changes a run's ``created_at`` (earlier or later) moves its summary to the
    new page key: every run appears once across pages (docs/protocol.md, "page")."""
    storage.contexts.save(record("a", created_at=5.0))
    storage.contexts.save(record("a", created_at=created_at))
    runs = storage.contexts.page().runs
    assert [(r.context_id, r.created_at) for r in runs] == [("a", created_at)]
    assert storage.documents.keys(CONTEXT_PAGES) == [context_page_key(created_at, "a")]


@pytest.mark.parametrize("shift", [-10.0, 10.0])
def test_a_save_moving_a_summary_to_a_new_page_key_writes_it_to_outlive_the_head_anew(
    storage: MemoryStorage, clock: ManualClock, shift: float
) -> None:
    """A summary written under a new page key (the run's ``created_at`` changed, the status
    not) is written like a new one, with twice ``context_ttl`` from now, not with the expiry
    the old key's summary had."""
    start = clock()
    rec = dataclasses.replace(record("moved", created_at=start), base="b")
    storage.contexts.save(rec)
    clock.advance(TTL * 0.5)
    storage.contexts.save(dataclasses.replace(rec, created_at=start + shift))
    moved = storage.documents.raw(CONTEXT_PAGES, context_page_key(start + shift, "moved"))
    assert moved is not None and moved.expires_at == pytest.approx(clock() + 2 * TTL, abs=1e-3)


def test_a_run_of_more_segments_than_the_small_int_cache_loads(storage: MemoryStorage) -> None:
    """A chain of 300 segments (above 256, where ints stop being shared objects) loads whole."""
    rec = dataclasses.replace(record("long"), base="b",
                              segments=tuple(f'"{n}"' for n in range(300)))
    storage.contexts.save(rec)
    assert storage.contexts.load("long") == rec


def test_an_append_losing_its_head_write_to_an_unmoved_chain_retries_and_appends(
    clock: ManualClock,
) -> None:
    """An append whose compare-and-set of the head is lost to a write that left the chain
    where it was retries on the new head and appends its segment once (the chain only moves
    through the head: docs/protocol.md, "Incremental checkpoints")."""
    docs, storage = _hooked_storage(clock)
    rec = dataclasses.replace(record("bumped"), base="b")
    storage.contexts.save(rec)

    def rewrite_head() -> None:  # the same head written again: a new version, the same chain
        head = docs.docs.read(CONTEXTS, "bumped")
        assert docs.docs.write(CONTEXTS, "bumped", head.value, expected_version=head.version,
                               expires_at=head.expires_at, index="running")

    docs.after_context_read = rewrite_head
    assert storage.contexts.append(ContextDelta(
        context_id="bumped", base="b", position=1, status="running", updated_at=3.0,
        segment='{"s":1}'))
    loaded = storage.contexts.load("bumped")
    assert loaded is not None and loaded.segments == ('{"s":1}',)
    assert len(_pieces(storage, "bumped")) == 2  # type: ignore[arg-type]


def test_a_store_built_without_a_ttl_keeps_contexts_a_day(clock: ManualClock) -> None:
    """``context_ttl`` defaults to 86400 s, the setting's default (docs/protocol.md,
    "Conventions")."""
    docs = MemoryDocumentStore(clock=clock)
    contexts = DocumentContextStore(docs)
    contexts.save(dataclasses.replace(record("r"), base="b"))
    assert MemoryProbe(docs).ttl(CONTEXTS, "r") == pytest.approx(86400.0)


def test_page_returns_at_most_50_runs_by_default(storage: MemoryStorage) -> None:
    """``ContextStore.page``'s default ``limit`` is 50 (docs/protocol.md, "Contexts")."""
    for n in range(51):
        storage.contexts.save(record(f"r{n:02d}", created_at=float(n + 1)))
    first = storage.contexts.page()
    assert len(first.runs) == 50 and first.next_cursor is not None
    assert first.runs[0].context_id == "r50"
    rest = storage.contexts.page(cursor=first.next_cursor)
    assert [row.context_id for row in rest.runs] == ["r00"] and rest.next_cursor is None
