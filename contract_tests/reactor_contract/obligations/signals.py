"""Obligations of the signals concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SIGNALS = 'docs/protocol.md, "Signals"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-signals-1",
        "A subscription listens from subscribe(channel) on: every message published on the "
        "channel after the call is returned by Subscription.get, in the order it was "
        "published.",
        _SIGNALS,
    ),
    Obligation(
        "O-signals-2",
        "Subscription.get(timeout) returns None when no message came within timeout seconds.",
        _SIGNALS,
    ),
    Obligation(
        "O-signals-3",
        "A Subscription.get blocked in its wait returns the message as soon as one is "
        "published on its channel.",
        _SIGNALS,
    ),
    Obligation(
        "O-signals-4",
        "publish(channel, message) to a channel nobody subscribes to is not an error.",
        _SIGNALS,
    ),
    Obligation(
        "O-signals-5",
        "A subscription receives only its own channel's messages, never another channel's.",
        _SIGNALS,
    ),
    Obligation(
        "O-signals-6",
        "Subscription.close() stops listening: nothing published after it is returned; "
        "closing twice is not an error.",
        _SIGNALS,
    ),
)
