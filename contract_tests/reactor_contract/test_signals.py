"""Signals, an optional capability (docs/protocol.md#signals).

Skipped with a reason when the adapter declares ``Capabilities(signals=False)``.
"""

from __future__ import annotations

import threading

import pytest

from reactor.ports.storage import SignalStore, Storage
from reactor_contract._support import uid

__all__ = ["SignalsContract"]

#: The skip reason listed in the conformance table.
NO_SIGNALS = "capability: signals not supported (Capabilities.signals is False)"


class SignalsContract:
    """:class:`reactor.ports.SignalStore` behaviour of adapters that declare signals."""

    reactor_concern = "signals"

    @pytest.fixture
    def signals(self, storage: Storage) -> SignalStore:
        """The adapter's signal store; skips when the capability is missing."""
        if not storage.capabilities.signals or storage.signals is None:
            pytest.skip(NO_SIGNALS)
        return storage.signals

    @pytest.mark.obligations("O-signals-1")
    def test_a_subscriber_gets_messages_published_after_it_subscribed(
        self, signals: SignalStore
    ) -> None:
        channel = uid("chan")
        subscription = signals.subscribe(channel)
        try:
            signals.publish(channel, "done:1")
            signals.publish(channel, "done:2")
            assert subscription.get(timeout=5) == "done:1"
            assert subscription.get(timeout=5) == "done:2"
        finally:
            subscription.close()

    @pytest.mark.obligations("O-signals-2")
    def test_get_times_out_with_none(self, signals: SignalStore) -> None:
        subscription = signals.subscribe(uid("chan"))
        try:
            assert subscription.get(timeout=0.05) is None
        finally:
            subscription.close()

    @pytest.mark.obligations("O-signals-5")
    def test_channels_are_isolated(self, signals: SignalStore) -> None:
        a, b = uid("chan"), uid("chan")
        sub_a = signals.subscribe(a)
        try:
            signals.publish(b, "for-b")
            signals.publish(a, "for-a")
            assert sub_a.get(timeout=5) == "for-a"
        finally:
            sub_a.close()

    @pytest.mark.obligations("O-signals-4")
    def test_publish_without_subscribers_never_raises(self, signals: SignalStore) -> None:
        signals.publish(uid("chan"), "nobody listens")

    @pytest.mark.obligations("O-signals-3")
    def test_a_blocked_subscriber_wakes_on_publish(self, signals: SignalStore) -> None:
        channel = uid("chan")
        subscription = signals.subscribe(channel)
        got: list[str | None] = []
        waiter = threading.Thread(target=lambda: got.append(subscription.get(timeout=10)))
        try:
            waiter.start()
            signals.publish(channel, "wake")
            waiter.join(timeout=10)
            assert not waiter.is_alive() and got == ["wake"]
        finally:
            subscription.close()
            waiter.join(timeout=10)

    @pytest.mark.obligations("O-signals-6")
    def test_close_is_idempotent_and_stops_delivery(self, signals: SignalStore) -> None:
        channel = uid("chan")
        subscription = signals.subscribe(channel)
        subscription.close()
        subscription.close()
        signals.publish(channel, "late")
        assert subscription.get(timeout=0.05) is None


class TestSignals(SignalsContract):
    """The signals contract against ``--reactor-storage``."""
