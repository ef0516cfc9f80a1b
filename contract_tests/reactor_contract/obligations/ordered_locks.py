"""Obligations of the ordered_locks concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_ORDERED = 'docs/protocol.md, "Ordered locks"'
_FENCING = 'docs/coordination.md, "Fencing tokens"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-ordered_locks-1",
        "assign(key, ttl=) hands out consecutive nonces 1, 2, 3, ... within a batch, every "
        "ticket carrying the batch's epoch, and starts each ticket's liveness timer (peek "
        "shows next_nonce, the cursor and the in-flight nonces).",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-2",
        "A nonce is never handed out twice in a batch: after out-of-order completions dropped "
        "their timers, the next assign still gets a nonce after every nonce already handed "
        "out.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-3",
        "assign re-stamps the lock's fields (next nonce, cursor, timers, epoch) to expire ttl "
        "seconds after the call.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-4",
        "Nonce 1 starts a batch whose epoch is an int in 1 .. 2**53 - 1 greater than every "
        "earlier epoch of the key: after a full drain, idle expiry, reset, and garbage "
        "collection of the record (max(previous epoch + 1, now in integer microseconds)).",
        _FENCING,
    ),
    Obligation(
        "O-ordered_locks-5",
        "A ticket's fencing_key is (epoch, nonce), and the fencing keys of the tickets issued "
        "for a key strictly increase: within a batch and across drains, idle expiry and reset.",
        _FENCING,
    ),
    Obligation(
        "O-ordered_locks-6",
        "can_proceed answers stale for a ticket whose non-zero epoch is not the current one "
        "(an earlier batch, a reset or idle-expired line); a ticket of epoch 0 is never "
        "fenced.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-7",
        "can_proceed answers drained_go for a ticket of the current epoch whose batch was "
        "drained, and changes nothing.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-8",
        "can_proceed answers go (with last_completed and first_failed) when the ticket's nonce "
        "is right after the cursor, or at or behind it (an idempotent retry).",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-9",
        "can_proceed skips the blockers whose timer is missing or older than "
        "poison_pill_timeout, a chain of them in one call and stopping at the first live "
        "blocker, moving the cursor past them; it answers poison_advance (with the new cursor) "
        "when that made the ticket's turn come.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-10",
        "can_proceed answers wait, with the cursor and a retry_after of at least 1 s (and at "
        "most poison_pill_timeout), while a live blocker is ahead of the ticket.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-11",
        "can_proceed re-stamps the caller's own liveness timer, so a later gate does not drain "
        "it as dead.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-12",
        "heartbeat(key, ticket) re-stamps the ticket's live timer and returns True; it returns "
        "False when the ticket is fenced (another epoch) or its timer is gone, and nothing "
        "recreates a deleted timer.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-13",
        "advance of the nonce right after the cursor moves the cursor to it, keeping the "
        "cursor's TTL, and returns the new cursor.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-14",
        "An out-of-order advance (a nonce beyond the one right after the cursor) only drops "
        "its timer: the cursor stays and is returned.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-15",
        "advance with failed=True of a nonce ahead of the cursor records first_failed, the "
        "smallest such nonce (peek and can_proceed report it); a failure at or behind the "
        "cursor records nothing.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-16",
        "When the cursor reaches the last assigned nonce the batch is collected: peek reads "
        "zeros (first_failed cleared), and the next assign starts a new batch at nonce 1 with "
        "a greater epoch.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-17",
        "advance ignores a ticket of a stale epoch (it returns the current cursor) and a "
        "ticket of a drained batch (it returns 0): it records nothing, neither a first_failed "
        "nor a recreated batch.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-18",
        "skip(key, nonce) moves the cursor forward to nonce (never back), keeping its TTL, and "
        "returns the cursor; on an unused or drained lock it changes nothing and returns 0; "
        "skipping to the last assigned nonce drains the batch.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-19",
        "reset(key) deletes everything readable: peek reads zeros (epoch 0), earlier tickets "
        "are stale, and the next assign gets nonce 1 with a greater epoch.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-20",
        "peek(key) of a key never used, drained, reset or idle-expired reads all zeros with no "
        "in-flight nonce.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-21",
        "Ordered locks of different keys are independent.",
        _ORDERED,
    ),
    Obligation(
        "O-ordered_locks-22",
        "A line whose fields all lapsed reads as absent: peek reads zeros, earlier tickets are "
        "stale and the next assign gets nonce 1.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-ordered_locks-23",
        "No permanent state per key: after reset, and after every field lapsed, the stored "
        "record (with the epoch it keeps as a fence) lives at most FENCE_RETENTION (5 s).",
        _FENCING,
    ),
    Obligation(
        "O-ordered_locks-24",
        "A ttl that is neither None nor a positive finite number of seconds (0, negative, "
        "infinite, NaN) makes assign and advance raise ValueError and change nothing.",
        'docs/protocol.md, "Conventions"',
    ),
    Obligation(
        "O-ordered_locks-25",
        "assign is atomic: waiters racing for tickets of one ordered lock get the nonces "
        "1..n, each once, all of one epoch.",
        _ORDERED,
        checked="probabilistic",
        how="test_concurrency races 8 assigns on a fresh key per round, released together by "
        "a barrier and a spin until all are awake, with the thread switch interval cut to "
        "1 us: at least 20 rounds, up to 300 within 1 s, then one race checks the epoch. A "
        "read-then-write assign hands one nonce out twice when two interleave between the "
        "read and the write: about one race in ten in-process, nearly every race over a "
        "network, so it fails with overwhelming odds.",
    ),
    Obligation(
        "O-ordered_locks-26",
        "On any sequence of assign, can_proceed, advance, heartbeat, skip, reset and peek "
        "calls, expiries (whole or of one timer) and garbage collections, the store answers "
        "what the pure model reactor.model.coordination.ordered_locks answers (epochs "
        "compared by their order).",
        'docs/writing-an-adapter.md, "Native fast paths"',
        checked="probabilistic",
        how="test_model draws 30 random sequences of up to 40 operations on 2 keys per run "
        "(hypothesis) and compares every answer with the model's; a divergence that only a "
        "rare sequence reaches may escape one run.",
    ),
)
