"""MemorySignalStore: in-process best-effort pub/sub (docs/protocol.md#signals)."""

from __future__ import annotations

from reactor.memory import MemorySignalStore


def test_closing_one_subscription_keeps_the_others_of_its_channel() -> None:
    """Closing a subscription stops only that one: the other subscriptions of its channel
    still receive what is published on it."""
    signals = MemorySignalStore()
    closed, kept = signals.subscribe("ch"), signals.subscribe("ch")
    closed.close()
    assert signals.subscriber_count("ch") == 1
    signals.publish("ch", "still heard")
    assert kept.get(timeout=0) == "still heard"
    assert closed.get(timeout=0) is None
    kept.close()
    assert signals.subscriber_count("ch") == 0
