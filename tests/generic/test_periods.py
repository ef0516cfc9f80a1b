"""DocumentPeriodStore over a DocumentStore (docs/protocol.md#periods)."""

from __future__ import annotations

from reactor.generic.periods import DocumentPeriodStore
from reactor.model.coordination import bucket_key
from reactor.model.records import PeriodMarker
from reactor.ports.storage import PeriodStore

from .conftest import START, ProbeDocs


def test_is_a_period_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentPeriodStore(docs), PeriodStore)


def test_item_33_mark_and_marker(docs: ProbeDocs) -> None:
    store = DocumentPeriodStore(docs)
    key = bucket_key("report", "day", docs.now())
    assert store.marker(key) is None
    assert store.mark(key, ttl=172800, context_id="ctx-1") is True
    assert store.marker(key) == PeriodMarker("ctx-1", START)
    assert store.mark(key, ttl=172800, context_id="ctx-2") is False  # first wins
    assert store.marker(key) == PeriodMarker("ctx-1", START)
    assert store.mark("legacy", ttl=10) is True
    assert store.marker("legacy") == PeriodMarker(None, START)


def test_marker_expires(docs: ProbeDocs) -> None:
    store = DocumentPeriodStore(docs)
    store.mark("k", ttl=10, context_id="a")
    docs.advance(10)
    assert store.marker("k") is None
    assert store.mark("k", ttl=10, context_id="b") is True


def test_item_34_ttl_none_keeps_the_first_claim_forever(docs: ProbeDocs) -> None:
    store = DocumentPeriodStore(docs)
    assert store.mark("k", ttl=None, context_id="first") is True
    docs.advance(10**8)
    assert store.mark("k", ttl=None, context_id="second") is False
    assert store.marker("k") == PeriodMarker("first", START)
