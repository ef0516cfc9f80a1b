"""MemoryStorage, its signals, probe and URL factory."""

from __future__ import annotations

import threading
import time

import pytest

import reactor.ports as ports
from reactor.errors import ConfigurationError
from reactor.generic.contexts import CONTEXTS
from reactor.memory import (
    ManualClock,
    MemoryDocumentStore,
    MemoryProbe,
    MemorySignalStore,
    MemoryStorage,
    storage_from_url,
)
from reactor.ports import ContextRecord
from reactor.ports.capabilities import in_process

SUB_STORES = {
    "contexts": ports.ContextStore,
    "step_results": ports.StepResultStore,
    "maps": ports.MapStore,
    "map_rollbacks": ports.MapRollbackStore,
    "claims": ports.ClaimStore,
    "locks": ports.LockStore,
    "semaphores": ports.SemaphoreStore,
    "rate_limits": ports.RateLimitStore,
    "periods": ports.PeriodStore,
    "ordered_locks": ports.OrderedLockStore,
    "signals": ports.SignalStore,
}


def test_memory_storage_satisfies_every_protocol() -> None:
    storage = MemoryStorage()
    assert isinstance(storage, ports.Storage)
    for name, protocol in SUB_STORES.items():
        assert isinstance(getattr(storage, name), protocol), name
    assert isinstance(storage.documents, ports.DocumentStore)


def test_capabilities() -> None:
    caps = MemoryStorage().capabilities
    assert caps == ports.Capabilities(signals=True, max_document_bytes=None, clock="application")


def test_now_is_the_injected_clock() -> None:
    clock = ManualClock(1000.0)
    storage = MemoryStorage(clock=clock)
    assert storage.now() == 1000.0
    storage.advance(5)
    assert storage.now() == 1005.0 == clock()


def test_advance_needs_a_manual_clock() -> None:
    with pytest.raises(TypeError):
        MemoryStorage().advance(1)


def test_reset_and_close() -> None:
    storage = MemoryStorage()
    storage.contexts.save(ContextRecord("c", "R", "running", "{}", 1.0, 1.0))
    storage.reset()
    assert storage.contexts.load("c") is None
    storage.close()
    storage.close()


def test_context_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MemoryStorage(context_ttl=0)


def test_storage_from_url() -> None:
    assert storage_from_url("memory://").context_ttl == 86400.0
    assert storage_from_url("memory://", context_ttl=60, visibility_timeout=3).context_ttl == 60
    assert storage_from_url("memory://?context_ttl=5", context_ttl=60).context_ttl == 5.0
    assert storage_from_url("memory://?prefix=t-1").context_ttl == 86400.0


@pytest.mark.parametrize(
    "url", ["redis://x", "memory://?context_ttl=abc", "memory://?context_ttl=-1",
            "memory://?other=1", "memory://host"],
)
def test_storage_from_url_rejects_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        storage_from_url(url)


def test_storage_retention_uses_context_ttl() -> None:
    clock = ManualClock()
    storage = MemoryStorage(clock=clock, context_ttl=30)
    storage.contexts.save(ContextRecord("c", "R", "running", "{}", 1.0, 1.0))
    assert MemoryProbe(storage).ttl(CONTEXTS, "c") == pytest.approx(30)
    clock.advance(30)
    assert storage.contexts.load("c") is None


# -- signals -------------------------------------------------------------------------------------


def test_signals_deliver_messages_published_after_subscribe() -> None:
    signals = MemorySignalStore()
    signals.publish("ch", "before")  # nobody listens: dropped, never raises
    sub = signals.subscribe("ch")
    other = signals.subscribe("other")
    signals.publish("ch", "one")
    signals.publish("ch", "two")
    assert sub.get(timeout=0) == "one"
    assert sub.get(timeout=1) == "two"
    assert sub.get(timeout=0) is None
    assert other.get(timeout=0) is None
    sub.close()
    sub.close()
    assert signals.subscriber_count("ch") == 0
    signals.publish("ch", "after close")
    assert sub.get(timeout=0) is None


def test_signals_fan_out_and_cross_threads() -> None:
    signals = MemoryStorage().signals
    a, b = signals.subscribe("done:1"), signals.subscribe("done:1")
    publisher = threading.Thread(target=signals.publish, args=("done:1", "ok"))
    publisher.start()
    assert a.get(timeout=5) == "ok" and b.get(timeout=5) == "ok"
    publisher.join()



def test_a_signal_get_with_a_negative_timeout_takes_only_a_waiting_message() -> None:
    """A ``timeout`` of 0 or less never waits: it returns a message already waiting, else
    ``None`` (docs/protocol.md, "Signals": wait up to ``timeout`` seconds)."""
    signals = MemorySignalStore()
    sub = signals.subscribe("ch")
    assert sub.get(timeout=-0.5) is None
    assert sub.get(timeout=-5) is None
    signals.publish("ch", "waiting")
    assert sub.get(timeout=-0.5) == "waiting"


def test_a_signal_get_waits_out_its_timeout_when_nothing_is_published() -> None:
    """``get(timeout)`` waits up to ``timeout`` seconds (docs/protocol.md, "Signals"): with
    nothing published it returns ``None`` only once the whole timeout has passed, so a waiter
    blocks instead of spinning. The lower bound is what the wait guarantees, whatever the
    machine's load."""
    sub = MemorySignalStore().subscribe("ch")
    started = time.monotonic()
    assert sub.get(timeout=0.2) is None
    assert time.monotonic() - started >= 0.2


# -- probe -----------------------------------------------------------------------------------------


def test_probe_reads_expires_and_reports_ttl() -> None:
    docs = MemoryDocumentStore.manual()
    probe = MemoryProbe(docs)
    docs.write("c", "k", {"v": 1}, expected_version=None, expires_at=docs.now() + 50)
    docs.write("c", "forever", {"v": 2}, expected_version=None, expires_at=None)
    assert probe.raw("c", "k") == {"v": 1}
    assert probe.ttl("c", "k") == pytest.approx(50)
    assert probe.ttl("c", "forever") is None and probe.exists("c", "forever")
    version = docs.read("c", "k").version
    assert probe.expire("c", "k") is True
    assert probe.raw("c", "k") is None and probe.ttl("c", "k") is None
    assert not probe.exists("c", "k")
    assert docs.read("c", "k").version == version  # expiry is not a write
    assert probe.expires_at("c", "k") == docs.now()
    assert probe.ttl("c", "absent") is None and probe.expires_at("c", "absent") is None


def test_memory_storage_declares_keeps_data_in_process_true() -> None:
    """``memory://`` sets ``keeps_data_in_process = True``, the value
    :func:`reactor.ports.capabilities.in_process` reads."""
    assert in_process(MemoryStorage())


def test_run_state_is_kept_a_day_by_default() -> None:
    """``context_ttl`` defaults to 86400 s: a run's state saved now reads back until a day
    has passed since its last write, and not after."""
    clock = ManualClock()
    storage = MemoryStorage(clock=clock)
    storage.contexts.save(ContextRecord("c", "R", "running", "{}", 1.0, 1.0))
    assert MemoryProbe(storage).ttl(CONTEXTS, "c") == pytest.approx(86400)
    clock.advance(86399.5)
    assert storage.contexts.load("c") is not None
    clock.advance(0.5)
    assert storage.contexts.load("c") is None
