"""DocumentRateLimitStore over a DocumentStore (docs/protocol.md#rate-limits)."""

from __future__ import annotations

import pytest

from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.model.records import RateDecision, RateWindow
from reactor.ports.storage import RateLimitStore

from .conftest import START, ProbeDocs

MINUTE = RateWindow("minute", 60, 2)
HOUR = RateWindow("hour", 3600, 1)


def test_is_a_rate_limit_store(docs: ProbeDocs) -> None:
    assert isinstance(DocumentRateLimitStore(docs), RateLimitStore)


def test_item_32_denial_charges_nothing(docs: ProbeDocs) -> None:
    store = DocumentRateLimitStore(docs)
    assert store.hit("api", [MINUTE, HOUR]) == RateDecision(True, 0.0, None)
    denied = store.hit("api", [MINUTE, HOUR])
    assert denied.allowed is False
    assert denied.window_index == 1
    assert 0.1 <= denied.retry_after <= 3600
    assert denied.retry_after == pytest.approx(3600 - START % 3600)
    assert store.count("api", MINUTE) == 1
    assert store.count("api", HOUR) == 1


def test_one_document_holds_every_window_and_lives_twice_the_longest(docs: ProbeDocs) -> None:
    store = DocumentRateLimitStore(docs)
    store.hit("api", [MINUTE, HOUR])
    raw = docs.raw("rate_limits", "api")
    assert raw is not None
    assert set(raw.value["windows"]) == {"minute/60.0", "hour/3600.0"}
    assert raw.expires_at == START + 7200


def test_bucket_rollover_admits_again(docs: ProbeDocs) -> None:
    store = DocumentRateLimitStore(docs)
    second = RateWindow("second", 1, 1)
    assert store.hit("k", [second]).allowed is True
    denied = store.hit("k", [second])
    assert denied.allowed is False
    docs.advance(denied.retry_after)
    assert store.hit("k", [second]).allowed is True
    assert store.count("k", second) == 1


def test_keys_are_independent(docs: ProbeDocs) -> None:
    store = DocumentRateLimitStore(docs)
    one = RateWindow("w", 60, 1)
    assert store.hit("a", [one]).allowed is True
    assert store.hit("b", [one]).allowed is True
    assert store.count("c", one) == 0
