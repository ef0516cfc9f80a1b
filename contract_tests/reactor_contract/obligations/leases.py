"""Obligations of the leases concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_RENEWAL = 'docs/coordination.md, "Renewal and loss"'
_TTLS = 'docs/coordination.md, "Locks, semaphores and ordered locks: TTLs"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-leases-1",
        "A lock taken with the 1 s minimum lease (MIN_LEASE) and extended by its holder every "
        "lease/3 (the Lock client, giving up the declared Capabilities.clock_skew) stays held "
        "through 3 s: every extend answers True in time and no other owner's acquire succeeds "
        "meanwhile.",
        _RENEWAL,
    ),
    Obligation(
        "O-leases-2",
        "A semaphore lease of 1 s (limit 1) renewed by its holder every lease/3 (the Semaphore "
        "client) stays held through 3 s: no other holder gets the slot meanwhile.",
        _RENEWAL,
    ),
    Obligation(
        "O-leases-3",
        "After extends that raised (a transient StorageError) twice inside a 1 s lock or "
        "semaphore lease, the holder's next extend of the still-live hold answers True: the "
        "hold is kept, nobody else gets in and no loss is reported.",
        _RENEWAL,
    ),
    Obligation(
        "O-leases-4",
        "A lock lapses in the store no earlier than its holder's deadline: the store stamps the "
        "expiry from a clock reading no earlier than the acquire or extend started, plus the "
        "ttl, within the declared clock_skew, so when extends keep failing a second owner's "
        "acquire succeeds only after the holder was told of the loss.",
        _TTLS,
    ),
    Obligation(
        "O-leases-5",
        "A semaphore lease lapses in the store no earlier than its holder's deadline: when "
        "extends keep failing, another holder gets the slot only after the holder was told of "
        "the loss.",
        _TTLS,
    ),
    Obligation(
        "O-leases-6",
        "Once the store gave a lapsed lock to another owner, the old holder's next extend "
        "answers False (it neither raises nor answers True), so the take-over is reported at "
        "that extend; the old holder's late release answers False and frees nothing.",
        _RENEWAL,
    ),
    Obligation(
        "O-leases-7",
        "Once a lapsed semaphore lease's slot went to another holder, the old holder's next "
        "extend answers False (it neither raises nor answers True), and its late release "
        "answers False.",
        _RENEWAL,
    ),
    Obligation(
        "O-leases-8",
        "An ordered-lock turn whose liveness timer is gone (skipped by an operator) is refused "
        "at its holder's next heartbeat (False), so the OrderedLock client reports the turn "
        "lost.",
        _RENEWAL,
    ),
)
