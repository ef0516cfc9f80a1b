"""The generic coordination stores implement the port Protocols with identical signatures: the
required protocol and the optional ones they declare (docs/protocol.md, "Optional storage
operations")."""

from __future__ import annotations

import inspect

import pytest

from reactor.generic.locks import DocumentLockStore
from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.generic.periods import DocumentPeriodStore
from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.ports.capabilities import ResetsSemaphores
from reactor.ports.storage import (
    LockStore,
    OrderedLockStore,
    PeriodStore,
    RateLimitStore,
    SemaphoreStore,
)

from .conftest import FakeDocumentStore

PAIRS = [
    (DocumentLockStore, (LockStore,), "locks"),
    (DocumentSemaphoreStore, (SemaphoreStore, ResetsSemaphores), "semaphores"),
    (DocumentRateLimitStore, (RateLimitStore,), "rate_limits"),
    (DocumentPeriodStore, (PeriodStore,), "periods"),
    (DocumentOrderedLockStore, (OrderedLockStore,), "ordered_locks"),
]


@pytest.mark.parametrize(("cls", "protocols", "collection"), PAIRS)
def test_signatures_match_the_protocol(
    cls: type, protocols: tuple[type, ...], collection: str
) -> None:
    store = cls(FakeDocumentStore())
    assert all(isinstance(store, protocol) for protocol in protocols)
    public = {n for n in vars(cls) if not n.startswith("_")}
    declared = {n: protocol for protocol in protocols for n, m in vars(protocol).items()
                if not n.startswith("_") and callable(m)}
    assert public == set(declared)
    for name, protocol in declared.items():
        assert inspect.signature(getattr(cls, name)) == inspect.signature(
            getattr(protocol, name)
        ), name
    params = inspect.signature(cls).parameters
    assert list(params) == ["documents", "collection"]
    assert params["collection"].default == collection
