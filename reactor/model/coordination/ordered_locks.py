"""Ordered locks (strict nonce sequencing with an epoch fence and a poison pill), pure.

Semantics: docs/protocol.md#ordered-locks, checked by ``reactor_contract.test_ordered_locks``.
The Ruby adapter keeps five Redis keys per ordered-lock key, each with its own TTL; the state
here keeps the same five logical fields, each a :class:`Timed` value with its own
``expires_at`` judged against the ``now`` passed in:

============== ==========================================================================
``next_nonce``  the last assigned nonce
``cursor``      ``last_completed``
``timers``      ``assigned_at``: ``{nonce: epoch seconds}``, the in-flight liveness timers
``first_failed`` the smallest failed nonce ahead of the cursor (strict-mode poison marker)
``epoch``       the batch generation; never garbage-collected, it only expires when idle
============== ==========================================================================

When the cursor catches up with ``next_nonce`` (:func:`advance`, :func:`skip`), ``next_nonce``,
``cursor``, ``timers`` and ``first_failed`` are garbage-collected so the next :func:`assign`
starts again at nonce 1 with a higher epoch, which fences stragglers of the drained batch.

Epochs increase forever (docs/coordination.md#fencing-tokens): a fresh batch's epoch is
``max(previous epoch + 1, clock in µs)``
(:func:`reactor.model.coordination.fencing.next_fence`), where the previous epoch is read from
the stored ``epoch`` field *even when it has lapsed*. A lapsed epoch reads as absent everywhere
else (peek reports 0, old tickets are fenced as before), but the store keeps it:
:func:`expiry` is the longest-lived field's expiry plus
:data:`~reactor.model.coordination.fencing.FENCE_RETENTION`, and :func:`reset` leaves the
epoch behind as a lapsed field instead of deleting it. Once a store has collected the record,
the clock term alone exceeds every earlier epoch. :attr:`OrderedTicket.fencing_key`
``(epoch, nonce)`` is an ordered lock's fencing token.

TTL rules (Redis semantics): :func:`assign` re-stamps ``next_nonce``, ``cursor``, ``timers`` and
``epoch`` to ``now + ttl``; a failure sets ``first_failed`` with ``EX ttl``; moving the cursor
keeps its TTL (``KEEPTTL``: a plain SET would persist it forever). When the cursor must be
written while absent (only reachable when ``next_nonce`` outlives it), it inherits
``next_nonce``'s expiry instead of Redis's "no TTL", so it can never become immortal. An empty
timer map is absent, as an empty Redis hash is.

Every operation is ``op(state, now, ...) -> (new_state, result)``; ``state`` ``None`` is a
never-used (or reset, or fully expired) lock. A call that changes nothing returns a state equal
to the one it was given (or that state with its lapsed fields removed).

Deviations from the Ruby scripts, all unreachable in a consistent state or fixing a hang/leak:

* a missing or expired timer counts as dead in the poison drain (the spec's own fix), and a
  timer stamped at epoch second 0 is a real timer, not "missing";
* a fresh batch (nonce 1) drops a ``first_failed`` marker left over from an idle-expired batch
  (its ``EX ttl`` was set after the last assign, so it can outlive ``next_nonce``), keeping the
  spec's promise that a new batch starts un-poisoned;
* a nonce > 1 assigned while the epoch is absent (it lapsed on its own, which only tampering
  can cause) starts a new epoch, stored, rather than reporting 1: the ticket is never fenced by
  its own lock and the epoch still never goes back;
* a transition that rewrites the live fields keeps a lapsed epoch it found (the fence of the
  next batch) instead of dropping it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from reactor.model.coordination._expiry import deadline, is_live, latest
from reactor.model.coordination.fencing import FENCE_RETENTION, next_fence
from reactor.model.records import OrderedGate, OrderedGateState, OrderedLockState, OrderedTicket

__all__ = [
    "DEFAULT_POISON_PILL_TIMEOUT",
    "DEFAULT_TTL",
    "OrderedLockRecord",
    "Timed",
    "advance",
    "assign",
    "can_proceed",
    "expiry",
    "heartbeat",
    "live",
    "peek",
    "reset",
    "skip",
]

#: The Ruby client's default TTL of the ordered-lock keys, in seconds.
DEFAULT_TTL = 86_400.0
#: The Ruby client's default poison-pill timeout, in seconds.
DEFAULT_POISON_PILL_TIMEOUT = 600.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Timed(Generic[T]):
    """A value with its own expiry (one Redis key of the five).

    Attributes:
        value: the value.
        expires_at: epoch seconds when it lapses, ``None`` for never.
    """

    value: T
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class OrderedLockRecord:
    """The five logical fields of one ordered lock; ``None`` = absent.

    Attributes:
        next_nonce: the last assigned nonce.
        cursor: ``last_completed``.
        timers: ``{nonce: assigned-at/heartbeat epoch seconds}``; never empty when present.
        first_failed: the strict-mode poison marker (> 0 when present).
        epoch: the batch generation.
    """

    next_nonce: Timed[int] | None = None
    cursor: Timed[int] | None = None
    timers: Timed[Mapping[int, float]] | None = field(default=None)
    first_failed: Timed[int] | None = None
    epoch: Timed[int] | None = None


def _alive(item: Timed[T] | None, now: float) -> Timed[T] | None:
    if item is None or not is_live(item.expires_at, now):
        return None
    return item


def live(state: OrderedLockRecord | None, now: float) -> OrderedLockRecord | None:
    """The state with expired fields removed, ``None`` when nothing is left.

    Args:
        state: the stored state.
        now: the current time in epoch seconds.
    """
    if state is None:
        return None
    timers = _alive(state.timers, now)
    if timers is not None and not timers.value:
        timers = None
    result = OrderedLockRecord(
        next_nonce=_alive(state.next_nonce, now),
        cursor=_alive(state.cursor, now),
        timers=timers,
        first_failed=_alive(state.first_failed, now),
        epoch=_alive(state.epoch, now),
    )
    if result == OrderedLockRecord():
        return None
    return result


def _normal(state: OrderedLockRecord) -> OrderedLockRecord | None:
    if state.timers is not None and not state.timers.value:
        state = replace(state, timers=None)
    return None if state == OrderedLockRecord() else state


def expiry(state: OrderedLockRecord) -> float | None:
    """The instant after which the whole record is garbage (for native TTL / document expiry).

    The longest-lived field wins (the epoch usually outlives the rest, so a document holding the
    whole state must use this), plus ``FENCE_RETENTION`` so the last epoch still fences the next
    batch for that long after everything lapsed (docs/coordination.md#fencing-tokens).

    Args:
        state: the stored state.

    Returns:
        Epoch seconds, or ``None`` when a field never expires or there is no field.
    """
    fields = [
        f.expires_at
        for f in (state.next_nonce, state.cursor, state.timers, state.first_failed, state.epoch)
        if f is not None
    ]
    if not fields:
        return None
    last = latest(*fields)
    return None if last is None else last + FENCE_RETENTION


def _fence(state: OrderedLockRecord | None) -> int:
    """The last epoch the stored state remembers, live or lapsed (0 when none)."""
    return 0 if state is None or state.epoch is None else state.epoch.value


def _keep_fence(
    new: OrderedLockRecord | None, state: OrderedLockRecord | None
) -> OrderedLockRecord | None:
    """``new`` with the stored (lapsed) epoch of ``state`` when ``new`` has none."""
    if state is None or state.epoch is None or (new is not None and new.epoch is not None):
        return new
    return replace(new or OrderedLockRecord(), epoch=state.epoch)


def _value(item: Timed[int] | None) -> int:
    return 0 if item is None else item.value


def _stale(view: OrderedLockRecord | None, ticket_epoch: int) -> bool:
    current = 0 if view is None else _value(view.epoch)
    return ticket_epoch > 0 and ticket_epoch != current


def _drained(view: OrderedLockRecord | None) -> bool:
    return view is None or (view.next_nonce is None and view.cursor is None)


def _timers(view: OrderedLockRecord) -> dict[int, float]:
    return {} if view.timers is None else dict(view.timers.value)


def _with_timers(
    view: OrderedLockRecord, timers: dict[int, float]
) -> Timed[Mapping[int, float]] | None:
    """Replace the timer map's content, keeping its TTL (an empty map is absent)."""
    if not timers or view.timers is None:
        return None
    return Timed(timers, view.timers.expires_at)


def _set_cursor(view: OrderedLockRecord, value: int) -> Timed[int]:
    """``SET cursor value KEEPTTL``; an absent cursor inherits ``next_nonce``'s expiry."""
    if view.cursor is not None:
        return Timed(value, view.cursor.expires_at)
    inherited = view.next_nonce.expires_at if view.next_nonce is not None else None
    return Timed(value, inherited)


def _gc_if_drained(view: OrderedLockRecord) -> OrderedLockRecord:
    """Drop next/cursor/timers/first_failed when ``next > 0`` and ``cursor >= next``."""
    nxt = _value(view.next_nonce)
    if nxt > 0 and _value(view.cursor) >= nxt:
        return OrderedLockRecord(epoch=view.epoch)
    return view


def assign(
    state: OrderedLockRecord | None, now: float, ttl: float | None = DEFAULT_TTL
) -> tuple[OrderedLockRecord | None, OrderedTicket]:
    """Take the next nonce (docs/protocol.md#ordered-locks, ``assign``).

    1. ``next_nonce`` += 1 (from 0 when absent), re-stamped to ``now + ttl``.
    2. The cursor is created as 0, or keeps its value, re-stamped to ``now + ttl``.
    3. Nonce 1 (a fresh batch) gets a new epoch ``max(stored epoch + 1, clock in µs)``, the
       stored epoch read even when it lapsed or was reset (0 when the store holds none);
       otherwise the live epoch is kept (a new one as for nonce 1 when it is absent, so the
       ticket is never fenced by its own lock). The epoch is re-stamped to ``now + ttl``.
    4. ``timers[nonce] = now``, the map re-stamped to ``now + ttl``.
    5. A fresh batch drops any leftover ``first_failed`` (see the module notes).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        ttl: seconds the fields live after this call, ``None`` for no expiry.

    Returns:
        ``(new_state, OrderedTicket(nonce, epoch))``; a new epoch is strictly greater than
        every earlier epoch of the key (docs/coordination.md#fencing-tokens).

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number, or the epoch
            would exceed 2**53 - 1.
    """
    expires_at = deadline(now, ttl)
    view = live(state, now) or OrderedLockRecord()
    nonce = _value(view.next_nonce) + 1
    fresh = nonce == 1 or view.epoch is None
    epoch = next_fence(_fence(state), now) if fresh else _value(view.epoch)
    timers = _timers(view)
    timers[nonce] = now
    new = OrderedLockRecord(
        next_nonce=Timed(nonce, expires_at),
        cursor=Timed(_value(view.cursor), expires_at),
        timers=Timed(timers, expires_at),
        first_failed=None if nonce == 1 else view.first_failed,
        epoch=Timed(epoch, expires_at),
    )
    return new, OrderedTicket(nonce=nonce, epoch=epoch)


def can_proceed(
    state: OrderedLockRecord | None,
    now: float,
    ticket: OrderedTicket,
    poison_pill_timeout: float = DEFAULT_POISON_PILL_TIMEOUT,
) -> tuple[OrderedLockRecord | None, OrderedGate]:
    """Gate ``ticket`` (docs/protocol.md#ordered-locks, ``can_proceed``), in this order.

    1. Read the cursor ``last`` and ``first_failed`` (0 when absent).
    2. ``stale`` when ``ticket.epoch > 0`` differs from the current epoch (absent = 0); epoch 0
       is a legacy caller and never fenced.
    3. ``drained_go`` when both ``next_nonce`` and the cursor are absent; nothing is mutated.
    4. Heartbeat: when ``nonce > last`` and its timer exists, restamp it to ``now`` (a deleted
       timer is never re-created).
    5. ``go`` when ``nonce <= last`` (idempotent retries) or ``nonce == last + 1``.
    6. Poison drain: while ``last + 1 < nonce``, the blocker ``last + 1`` is dead when its
       timer is missing or older than ``poison_pill_timeout``; a dead blocker moves the cursor
       onto it (keeping the cursor's TTL) and drops its timer; a fresh one stops the loop.
    7. ``poison_advance`` (or ``go`` when nothing was drained) when ``nonce <= last + 1`` now.
    8. Otherwise ``wait`` with ``retry_after = pp - (now - timers[last + 1])`` (``pp`` when the
       timer is missing), at least 1.

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        ticket: the caller's ``(nonce, epoch)``.
        poison_pill_timeout: seconds after which a silent blocker counts as dead (``pp``).

    Returns:
        ``(new_state, OrderedGate(state, retry_after, last_completed, first_failed))`` where
        ``last_completed`` is the cursor after the call and ``retry_after`` is 0 unless waiting.
    """
    view = live(state, now)
    last = 0 if view is None else _value(view.cursor)
    first_failed = 0 if view is None else _value(view.first_failed)
    if _stale(view, ticket.epoch):
        return state, OrderedGate("stale", 0.0, last, first_failed)
    if view is None or _drained(view):
        return state, OrderedGate("drained_go", 0.0, last, first_failed)
    my = ticket.nonce
    timers = _timers(view)
    changed = False
    if my > last and my in timers:
        timers[my] = now
        changed = True
    advanced = False
    if not (my <= last or my == last + 1):
        while last + 1 < my:
            blocker = last + 1
            at = timers.get(blocker)
            if at is not None and now - at <= poison_pill_timeout:
                break
            last = blocker
            timers.pop(blocker, None)
            advanced = True
    if advanced or changed:
        new = replace(
            view,
            timers=_with_timers(view, timers),
            cursor=_set_cursor(view, last) if advanced else view.cursor,
        )
        new_state: OrderedLockRecord | None = _keep_fence(_normal(new), state)
    else:
        new_state = state
    if my <= last + 1:
        gate: OrderedGateState = "poison_advance" if advanced else "go"
        return new_state, OrderedGate(gate, 0.0, last, first_failed)
    blocker_at = timers.get(last + 1)
    wait = poison_pill_timeout if blocker_at is None else poison_pill_timeout - (now - blocker_at)
    return new_state, OrderedGate("wait", max(wait, 1.0), last, first_failed)


def advance(
    state: OrderedLockRecord | None,
    now: float,
    ticket: OrderedTicket,
    failed: bool = False,
    ttl: float | None = DEFAULT_TTL,
) -> tuple[OrderedLockRecord | None, int]:
    """Complete ``ticket`` (docs/protocol.md#ordered-locks, ``advance``).

    1. Stale epoch: a no-op returning the current cursor.
    2. Drained (``next_nonce`` and cursor absent): a no-op returning 0.
    3. ``failed`` and ``nonce > last``: ``first_failed = min(existing, nonce)`` with
       ``EX ttl``; failures at or behind the cursor are ignored (a redelivery cannot re-poison).
    4. ``nonce == last + 1``: the cursor moves to ``nonce`` keeping its TTL, the timer is
       dropped, and when ``next_nonce > 0`` and ``cursor >= next_nonce`` the batch is
       garbage-collected (the epoch survives).
    5. Otherwise (out of order): only the timer is dropped.

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        ticket: the caller's ``(nonce, epoch)``.
        failed: whether the unit ended in a terminal failure.
        ttl: seconds the ``first_failed`` marker lives, ``None`` for no expiry.

    Returns:
        ``(new_state, cursor)`` where ``cursor`` is ``last_completed`` after the call (the
        nonce it reached, even when that drained and garbage-collected the batch).

    Raises:
        ValueError: ``ttl`` is neither ``None`` nor a positive finite number.
    """
    expires_at = deadline(now, ttl)
    view = live(state, now)
    last = 0 if view is None else _value(view.cursor)
    if _stale(view, ticket.epoch):
        return state, last
    if view is None or _drained(view):
        return state, 0
    my = ticket.nonce
    new = view
    if failed and my > last:
        existing = _value(view.first_failed)
        marker = my if existing <= 0 else min(existing, my)
        new = replace(new, first_failed=Timed(marker, expires_at))
    timers = _timers(view)
    timers.pop(my, None)
    new = replace(new, timers=_with_timers(view, timers))
    if my == last + 1:
        last = my
        new = _gc_if_drained(replace(new, cursor=_set_cursor(view, my)))
    return _keep_fence(_normal(new), state), last


def heartbeat(
    state: OrderedLockRecord | None, now: float, ticket: OrderedTicket
) -> tuple[OrderedLockRecord | None, bool]:
    """Restamp ``ticket``'s liveness timer to ``now`` (``ordered_lock_heartbeat``).

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        ticket: the caller's ``(nonce, epoch)``.

    Returns:
        ``(new_state, True)`` when restamped; ``(state, False)`` when fenced by the epoch or when
        the timer is gone (a heartbeat never re-creates a deleted timer).
    """
    view = live(state, now)
    if view is None or _stale(view, ticket.epoch):
        return state, False
    timers = _timers(view)
    if ticket.nonce not in timers:
        return state, False
    timers[ticket.nonce] = now
    return _keep_fence(_normal(replace(view, timers=_with_timers(view, timers))), state), True


def skip(
    state: OrderedLockRecord | None, now: float, nonce: int
) -> tuple[OrderedLockRecord | None, int]:
    """Operator escape hatch: force the cursor to ``nonce`` (``ordered_lock_skip``).

    Drained: a no-op returning 0. Otherwise, when ``nonce > last`` the cursor moves to ``nonce``
    keeping its TTL; the nonce's timer is dropped; the batch is garbage-collected when the
    cursor reached ``next_nonce``.

    Args:
        state: the current state.
        now: the current time in epoch seconds.
        nonce: the nonce to move the cursor to.

    Returns:
        ``(new_state, cursor)`` with the cursor after the call.
    """
    view = live(state, now)
    if view is None or _drained(view):
        return state, 0
    last = _value(view.cursor)
    timers = _timers(view)
    timers.pop(nonce, None)
    new = replace(view, timers=_with_timers(view, timers))
    if nonce > last:
        last = nonce
        new = replace(new, cursor=_set_cursor(view, nonce))
    new = _gc_if_drained(new)
    return _keep_fence(_normal(new), state), last


def reset(state: OrderedLockRecord | None, now: float) -> tuple[OrderedLockRecord | None, None]:
    """Operator: delete every field, the epoch included (``ordered_lock_reset``).

    The epoch's value stays behind as a field lapsed at ``now`` (it reads as absent: peek shows
    zeros and every old ticket is fenced), which :func:`expiry` retains for
    ``FENCE_RETENTION`` seconds so the next batch still gets a greater epoch
    (docs/coordination.md#fencing-tokens).

    Args:
        state: the current state.
        now: the current time in epoch seconds.

    Returns:
        ``(OrderedLockRecord(epoch=Timed(last epoch, now)), None)``, or ``(None, None)`` when
        the state holds no epoch.
    """
    fence = _fence(state)
    if fence <= 0:
        return None, None
    return OrderedLockRecord(epoch=Timed(fence, now)), None


def peek(state: OrderedLockRecord | None, now: float) -> OrderedLockState:
    """The operator's view (``ordered_lock_peek``); read-only.

    Returns:
        Zeros for absent fields; ``in_flight`` holds the timers of nonces ahead of the cursor.
        After a full drain everything is zero except the surviving ``epoch``.
    """
    view = live(state, now)
    if view is None:
        return OrderedLockState(
            next_nonce=0, last_completed=0, first_failed=0, epoch=0, in_flight={}
        )
    last = _value(view.cursor)
    in_flight = {n: at for n, at in sorted(_timers(view).items()) if n > last}
    return OrderedLockState(
        next_nonce=_value(view.next_nonce),
        last_completed=last,
        first_failed=_value(view.first_failed),
        epoch=_value(view.epoch),
        in_flight=in_flight,
    )
