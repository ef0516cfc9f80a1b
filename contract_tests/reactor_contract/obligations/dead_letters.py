"""Obligations of the dead_letters concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_ADMIN = 'docs/protocol.md, "Dead-letter administration"'
_PROTOCOLS = 'docs/writing-an-adapter.md, "1. The protocols"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-dead_letters-1",
        "A DeadLetterAdmin router gives every dead letter a non-empty str id, unique among its "
        "dead letters.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-2",
        "A dead letter's id is stable: every read lists the same letters with the same ids.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-3",
        "dead_letters(limit, cursor) lists the letters oldest first, at most limit, starting "
        "after the letter whose id is cursor (the last letter of the previous page); a page "
        "after the last letter is [].",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-4",
        "dead_letters(limit) with limit <= 0 returns no letter.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-5",
        "dead_letters(cursor=...) with a cursor the router cannot place raises ValueError.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-6",
        "get_dead_letter(letter_id) returns the letter equal to the one listed (its reason "
        "and body kept), and None when there is no letter with that id or the id is malformed.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-7",
        "requeue_dead_letter(letter_id) puts the envelope back on the queue unchanged (id, "
        "kind, payload, attempt), due now, with a fresh delivery count (the next delivery has "
        "delivery_count 1), removes the letter and returns the job id.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-8",
        "requeue_dead_letter of an id that names no letter (never one, or already requeued) "
        "returns None and enqueues nothing.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-9",
        "Concurrent requeues of one letter enqueue its job once: exactly one caller gets the "
        "job id, every other one None.",
        _PROTOCOLS,
        checked="probabilistic",
        how="4 threads released together by a barrier requeue one letter (one race per run); "
        "the job must come back once and no second copy may show up within 2.5 s",
    ),
    Obligation(
        "O-dead_letters-10",
        "requeue_dead_letter of a letter whose body is not a job envelope raises "
        "DeserializationError, keeps the letter unchanged and enqueues nothing.",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-11",
        "purge_dead_letters(ids) deletes the listed letters and returns how many it deleted "
        "(an id naming no letter counts for none; an empty list deletes none).",
        _ADMIN,
    ),
    Obligation(
        "O-dead_letters-12",
        "purge_dead_letters() (ids None) deletes all of this queue's letters and returns how "
        "many, and no letter of a router on another prefix.",
        _ADMIN,
    ),
)
