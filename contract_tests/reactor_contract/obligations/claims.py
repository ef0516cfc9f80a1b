"""Obligations of the claims concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_CLAIMS = 'docs/protocol.md, "Claims"'

OBLIGATIONS: tuple[Obligation, ...] = (
    # ---- correlation ids ----------------------------------------------------------------------
    Obligation(
        "O-claims-1",
        "claim_correlation_id(correlation_id, context_id) returns None when context_id holds "
        "the id afterwards (a new claim, or its own already), and otherwise the holder's id, "
        "changing nothing.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-2",
        "correlation_context(correlation_id) returns the id of the run holding it, None when "
        "none does.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-3",
        "release_correlation_id deletes the mapping and returns True when something was "
        "deleted, False otherwise; a released id can be claimed by another run.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-4",
        "An expired correlation claim reads as absent and can be claimed by a new run.",
        _CLAIMS,
    ),
    # ---- idempotency keys ----------------------------------------------------------------------
    Obligation(
        "O-claims-5",
        "claim_idempotency_key(reactor, key, context_id) returns None only to the call that "
        "claimed the key; every later call, the holder's own included, gets the holder's id "
        "and changes nothing.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-6",
        "Idempotency keys are scoped by reactor: the same key of another reactor is a "
        "separate claim.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-7",
        "Idempotency keys of any length and alphabet are accepted, and distinct keys are "
        "distinct claims (hashing is allowed, truncation is not).",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-8",
        "release_idempotency_key is a compare-and-delete: only the holder context_id releases "
        "(True); another run, an already released or an absent key returns False and changes "
        "nothing.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-9",
        "reclaim_idempotency_key(reactor, key, from, to) moves the key to `to` only when "
        "`from` holds it (True); otherwise, an absent key included, it returns False and "
        "changes nothing.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-10",
        "reclaim_idempotency_key re-stamps the claim's retention to context_ttl.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-11",
        "An expired idempotency key is free: its old holder's release returns False and a new "
        "claim wins it.",
        _CLAIMS,
    ),
    # ---- interrupt resume claims and attempt counters --------------------------------------------
    Obligation(
        "O-claims-12",
        "claim_interrupt_resume(context_id, step_path, payload) returns True once per run and "
        "step path, keeping that first payload; every later claim of the same pair returns "
        "False and keeps it; other paths, the reserved @cancel included, are separate claims.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-13",
        "interrupt_resumes(context_id, step_paths) returns {step_path: payload} for the "
        "claimed paths among step_paths only ({} when none is claimed, for an empty list or "
        "for another run).",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-14",
        "increment_interrupt_attempts(context_id, step_path) returns the new count, starting "
        "at 1, counted per run and step path.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-15",
        "Every claim write stamps its record's retention to context_ttl (correlation ids, "
        "idempotency keys, interrupt claims), and every increment re-stamps the attempt "
        "counter's.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-16",
        "An expired interrupt resume claim reads as unclaimed, and an expired attempt counter "
        "starts again at 1.",
        _CLAIMS,
    ),
    Obligation(
        "O-claims-17",
        "Claims are first writer wins under concurrency: of racing claims of one correlation "
        "id, idempotency key or interrupt resume exactly one wins (the others get the holder "
        "or False, never an exception), and racing increments return distinct counts.",
        _CLAIMS,
        checked="probabilistic",
        how="8 threads claim one correlation id, idempotency key and interrupt resume, "
        "and increment one counter, "
        "each round on fresh keys, at least 20 rounds and up to 300 within 1 s, the "
        "threads released together with the thread switch interval cut to 1 µs "
        "(test_concurrency.race_rounds); a read-then-write claim loses "
        "when two racers both read the key free before either writes.",
    ),
)
