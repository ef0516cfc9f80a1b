"""Obligations that time values never round in the unsafe direction (docs/obligations.md;
docs/contract-suite.md, "The obligation catalogue" and "Properties over whole families")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SOURCE = 'docs/protocol.md, "Conventions"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-rounding-1",
        "A lock acquired or extended for a fractional TTL reports an expiry no earlier than "
        "the storage clock before the call plus that TTL (a lease never ends before its holder "
        "was told).",
        _SOURCE,
    ),
    Obligation(
        "O-rounding-2",
        "A semaphore lease acquired or extended for a fractional duration expires no earlier "
        "than the storage clock before the call plus that duration.",
        _SOURCE,
    ),
    Obligation(
        "O-rounding-3",
        "A period mark with a fractional TTL lives at least that TTL.",
        _SOURCE,
    ),
    Obligation(
        "O-rounding-4",
        "A job enqueued with a fractional delay is never delivered before the delay has "
        "passed (a transport with whole-second delays rounds up).",
        'docs/protocol.md, "Routers"',
    ),
)
