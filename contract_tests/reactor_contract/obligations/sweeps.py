"""Obligations of the sweeps concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_SWEEPS = 'docs/workers.md, "Sweep cursors and dispatch leases"'
_CURSORS = 'docs/protocol.md, "Sweep cursors"'

OBLIGATIONS: tuple[Obligation, ...] = (
    # ---- what each sweeper finds on the adapter ----------------------------------------------
    Obligation(
        "O-sweeps-1",
        "The run sweeper re-dispatches every running or rolling_back top-level run whose "
        "liveness lock is not held, and never a finished run, a run whose lock is held or a "
        "map element.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-2",
        "The step sweeper re-dispatches every dispatched step unit whose liveness lock is not "
        "held and that is not parked until a future instant, and never a completed one.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-3",
        "A dispatched step whose parked_until has passed is due and re-dispatched with its "
        "contention_attempts (the step-result scan keeps both).",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-4",
        "The map sweeper re-dispatches each element of a map in flight that has no stored "
        "result and no held element lock, and the collector (map_collect) of a map whose "
        "results are all stored.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-5",
        "The rollback sweeper re-dispatches the claimed rollback positions that have no "
        "outcome, and the next batch of a rollback whose trigger was lost.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-6",
        "A unit whose liveness lock is held is never re-dispatched; once the lock lapses the "
        "next sweep re-dispatches it.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-7",
        "Sweepers racing over the same lost units re-dispatch each unit exactly once (the "
        "dispatch mark is mark-if-absent).",
        _SWEEPS,
        checked="probabilistic",
        how="4 sweepers released by a barrier sweep the same 6 lost units of each sweeper "
        "kind; a non-atomic mark loses when two sweepers both find a unit unmarked.",
    ),
    Obligation(
        "O-sweeps-8",
        "A settled unit leaves its sweeper's index: a finished run, a completed step result, "
        "a map whose owner signal was claimed and a rollback whose signal was claimed are no "
        "longer listed by the sweeper's scan.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-9",
        "Settled maps never starve a lost element: with more settled maps than one sweep "
        "reads, the lost element is re-dispatched within one pass of ticks.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-10",
        "Each sweeper resumes from its cursor across ticks: n lost units are all "
        "re-dispatched, each once, within ceil(n / limit) ticks, no tick re-reading an "
        "earlier page, and the next pass starts over.",
        _SWEEPS,
    ),
    Obligation(
        "O-sweeps-11",
        "A unit re-dispatched within its dispatch lease is not enqueued again by later "
        "sweeps; once the lease's mark lapses the next sweep re-dispatches it.",
        _SWEEPS,
    ),
    # ---- the sweep cursor store (optional: storage.sweep_cursors) -------------------------------
    Obligation(
        "O-sweeps-12",
        "sweep_cursors.load(sweeper) returns None when no cursor is saved for that sweeper.",
        _CURSORS,
    ),
    Obligation(
        "O-sweeps-13",
        "sweep_cursors.save(sweeper, cursor) then load(sweeper) returns that cursor; the last "
        "save wins, and each of runs, steps, maps and map_rollbacks keeps its own cursor.",
        _CURSORS,
    ),
    Obligation(
        "O-sweeps-14",
        "sweep_cursors.save(sweeper, None) means start over: load(sweeper) then returns None.",
        _CURSORS,
    ),
    Obligation(
        "O-sweeps-15",
        "A saved cursor lives context_ttl seconds after its last save: load returns it before "
        "that and None after it.",
        _CURSORS,
    ),
)
