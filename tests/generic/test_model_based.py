"""The generic stores behave exactly like :class:`ReferenceCoordination`, call by call.

Random operation sequences (hypothesis) run against a generic store over a document store and
against the reference model sharing the document store's clock (docs/contract-suite.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactor.generic.locks import DocumentLockStore
from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.generic.periods import DocumentPeriodStore
from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.model.coordination import ReferenceCoordination
from reactor.model.records import OrderedTicket, RateWindow

from .conftest import FACTORIES, ProbeDocs

KEYS = st.sampled_from(["k1", "k2"])
WHO = st.sampled_from(["a", "b", "c"])
DT = st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 10.0, 700.0])

lock_op = st.one_of(
    st.tuples(st.just("acquire"), KEYS, WHO, st.sampled_from([None, 1.0, 5.0])),
    st.tuples(st.just("release"), KEYS, WHO),
    st.tuples(st.just("extend"), KEYS, WHO, st.sampled_from([None, 2.0, 8.0])),
    st.tuples(st.just("held"), KEYS),
    st.tuples(st.just("info"), KEYS),
)
semaphore_op = st.one_of(
    st.tuples(st.just("acquire"), KEYS, WHO, st.integers(0, 2), st.sampled_from([1.0, 5.0])),
    st.tuples(st.just("release"), KEYS, WHO),
    st.tuples(st.just("extend"), KEYS, WHO, st.sampled_from([1.0, 5.0])),
    st.tuples(st.just("state"), KEYS),
    st.tuples(st.just("reset"), KEYS),
)
WINDOWS = st.lists(
    st.sampled_from([RateWindow("s", 1, 2), RateWindow("m", 60, 3), RateWindow("z", 5, 0)]),
    max_size=3,
    unique=True,
)
rate_op = st.one_of(
    st.tuples(st.just("hit"), KEYS, WINDOWS),
    st.tuples(st.just("count"), KEYS, st.sampled_from([RateWindow("s", 1, 2)])),
)
period_op = st.one_of(
    st.tuples(
        st.just("mark"), KEYS, st.sampled_from([None, 2.0, 20.0]), st.sampled_from([None, "c"])
    ),
    st.tuples(st.just("marker"), KEYS),
)
TICKETS = st.builds(OrderedTicket, nonce=st.integers(0, 5), epoch=st.integers(0, 3))
ordered_op = st.one_of(
    st.tuples(st.just("assign"), KEYS, st.sampled_from([50.0, 2000.0])),
    st.tuples(st.just("can_proceed"), KEYS, TICKETS, st.sampled_from([5.0, 600.0])),
    st.tuples(st.just("advance"), KEYS, TICKETS, st.booleans(), st.sampled_from([30.0, 900.0])),
    st.tuples(st.just("heartbeat"), KEYS, TICKETS),
    st.tuples(st.just("skip"), KEYS, st.integers(0, 6)),
    st.tuples(st.just("reset"), KEYS),
    st.tuples(st.just("peek"), KEYS),
)


def _docs(name: str) -> ProbeDocs:
    return FACTORIES[name]()


def _call(store: Any, op: tuple[Any, ...]) -> Any:
    name, *args = op
    if name == "mark":
        key, ttl, context_id = args
        return store.mark(key, ttl=ttl, context_id=context_id)
    if name == "assign":
        key, ttl = args
        return store.assign(key, ttl=ttl)
    if name == "can_proceed":
        key, ticket, pp = args
        return store.can_proceed(key, ticket, poison_pill_timeout=pp)
    if name == "advance" and len(args) == 4:
        key, ticket, failed, ttl = args
        return store.advance(key, ticket, failed=failed, ttl=ttl)
    return getattr(store, name)(*args)


def _compare(docs: ProbeDocs, store: Any, reference: Any, ops: list[tuple[float, Any]]) -> None:
    for dt, op in ops:
        docs.advance(dt)
        assert _call(store, op) == _call(reference, op), op


BACKENDS = pytest.mark.parametrize("backend", sorted(FACTORIES))


@BACKENDS
@settings(max_examples=60)
@given(st.lists(st.tuples(DT, lock_op), max_size=40))
def test_locks_match_the_model(backend: str, ops: list[tuple[float, Any]]) -> None:
    docs = _docs(backend)
    _compare(docs, DocumentLockStore(docs), ReferenceCoordination(docs.now).locks, ops)


@BACKENDS
@settings(max_examples=60)
@given(st.lists(st.tuples(DT, semaphore_op), max_size=40))
def test_semaphores_match_the_model(backend: str, ops: list[tuple[float, Any]]) -> None:
    docs = _docs(backend)
    ref = ReferenceCoordination(docs.now).semaphores
    _compare(docs, DocumentSemaphoreStore(docs), ref, ops)


@BACKENDS
@settings(max_examples=60)
@given(st.lists(st.tuples(DT, rate_op), max_size=40))
def test_rate_limits_match_the_model(backend: str, ops: list[tuple[float, Any]]) -> None:
    docs = _docs(backend)
    ref = ReferenceCoordination(docs.now).rate_limits
    _compare(docs, DocumentRateLimitStore(docs), ref, ops)


@BACKENDS
@settings(max_examples=60)
@given(st.lists(st.tuples(DT, period_op), max_size=40))
def test_periods_match_the_model(backend: str, ops: list[tuple[float, Any]]) -> None:
    docs = _docs(backend)
    _compare(docs, DocumentPeriodStore(docs), ReferenceCoordination(docs.now).periods, ops)


@BACKENDS
@settings(max_examples=100)
@given(st.lists(st.tuples(DT, ordered_op), max_size=60))
def test_ordered_locks_match_the_model(backend: str, ops: list[tuple[float, Any]]) -> None:
    docs = _docs(backend)
    ref = ReferenceCoordination(docs.now).ordered_locks
    _compare(docs, DocumentOrderedLockStore(docs), ref, ops)
