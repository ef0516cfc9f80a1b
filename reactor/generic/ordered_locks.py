"""``DocumentOrderedLockStore``: ordered locks over any :class:`reactor.ports.DocumentStore`.

Semantics: docs/protocol.md#ordered-locks as implemented by the pure model
:mod:`reactor.model.coordination.ordered_locks`; atomicity: :mod:`reactor.generic._cas`. One
document per ordered-lock key holds the five logical fields, each with its own expiry (an
absent field is omitted)::

    {"next": {"value": 3, "expires_at": 1700086400.0},
     "cursor": {"value": 1, "expires_at": 1700086400.0},
     "timers": {"value": {"2": 1700000010.0, "3": 1700000011.0}, "expires_at": 1700086400.0},
     "first_failed": {"value": 2, "expires_at": 1700086500.0},
     "epoch": {"value": 4, "expires_at": 1700086400.0}}

The document expires :data:`~reactor.model.coordination.fencing.FENCE_RETENTION` seconds after
its longest-lived field, so garbage-collecting the batch never shortens the epoch that fences
its stragglers, and a lapsed or reset epoch (stored as an ``epoch`` field whose ``expires_at``
has passed) is still read by the next ``assign``, which makes epochs increase forever
(docs/coordination.md#fencing-tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import ordered_locks as model
from reactor.model.coordination.ordered_locks import Timed
from reactor.model.records import OrderedGate, OrderedLockState, OrderedTicket
from reactor.ports.documents import DocumentStore

__all__ = ["ORDERED_LOCKS", "ORDERED_LOCK_CODEC", "DocumentOrderedLockStore"]

#: The default collection of ordered lock documents (one per key).
ORDERED_LOCKS = "ordered_locks"

T = TypeVar("T")


def _field(item: Timed[T] | None, convert: Callable[[T], Any]) -> dict[str, Any] | None:
    if item is None:
        return None
    return {"value": convert(item.value), "expires_at": item.expires_at}


def _encode(state: model.OrderedLockRecord) -> dict[str, Any]:
    fields: dict[str, dict[str, Any] | None] = {
        "next": _field(state.next_nonce, int),
        "cursor": _field(state.cursor, int),
        "timers": _field(state.timers, lambda m: {str(n): at for n, at in m.items()}),
        "first_failed": _field(state.first_failed, int),
        "epoch": _field(state.epoch, int),
    }
    return {name: value for name, value in fields.items() if value is not None}


def _read(doc: Mapping[str, Any], name: str, convert: Callable[[Any], T]) -> Timed[T] | None:
    raw = doc.get(name)
    if raw is None:
        return None
    expires_at = raw["expires_at"]
    return Timed(convert(raw["value"]), None if expires_at is None else float(expires_at))


def _timers(raw: Any) -> Mapping[int, float]:
    return {int(nonce): float(at) for nonce, at in raw.items()}


def _decode(doc: Mapping[str, Any]) -> model.OrderedLockRecord:
    return model.OrderedLockRecord(
        next_nonce=_read(doc, "next", int),
        cursor=_read(doc, "cursor", int),
        timers=_read(doc, "timers", _timers),
        first_failed=_read(doc, "first_failed", int),
        epoch=_read(doc, "epoch", int),
    )


#: The document shape of an ordered lock.
ORDERED_LOCK_CODEC: StateCodec[model.OrderedLockRecord] = StateCodec(
    "ordered lock", _encode, _decode, model.expiry
)


class DocumentOrderedLockStore:
    """A :class:`reactor.ports.OrderedLockStore` over a :class:`reactor.ports.DocumentStore`.

    Timers, heartbeats and the poison-pill age are judged by the document store's clock.

    Args:
        documents: the versioned-document primitive.
        collection: the collection holding one document per ordered-lock key.
    """

    def __init__(self, documents: DocumentStore, collection: str = ORDERED_LOCKS) -> None:
        self._states = StateCollection(documents, collection, ORDERED_LOCK_CODEC)

    def _apply(
        self,
        key: str,
        transition: Callable[
            [model.OrderedLockRecord | None, float], tuple[model.OrderedLockRecord | None, T]
        ],
    ) -> T:
        return self._states.apply(key, transition)

    def assign(self, key: str, *, ttl: float) -> OrderedTicket:
        """Take the next nonce (:func:`reactor.model.coordination.ordered_locks.assign`).

        Args:
            key: the ordered-lock key.
            ttl: seconds the lock's fields live after this call.

        Returns:
            The ticket ``(nonce, epoch)`` to pass to every later call; a fresh batch's epoch is
            greater than every earlier epoch of ``key`` (docs/coordination.md#fencing-tokens).

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._apply(key, lambda state, now: model.assign(state, now, ttl))

    def can_proceed(
        self, key: str, ticket: OrderedTicket, *, poison_pill_timeout: float
    ) -> OrderedGate:
        """Gate ``ticket``: heartbeat its timer, drain dead blockers, answer go/wait/....

        Args:
            key: the ordered-lock key.
            ticket: the caller's ticket.
            poison_pill_timeout: seconds after which a silent blocker counts as dead.

        Returns:
            The gate (see :func:`reactor.model.coordination.ordered_locks.can_proceed`).

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._apply(
            key, lambda state, now: model.can_proceed(state, now, ticket, poison_pill_timeout)
        )

    def advance(self, key: str, ticket: OrderedTicket, *, failed: bool, ttl: float) -> int:
        """Complete ``ticket``; returns the cursor after the call.

        Args:
            key: the ordered-lock key.
            ticket: the caller's ticket.
            failed: whether the unit ended in a terminal failure (records ``first_failed``).
            ttl: seconds a ``first_failed`` marker lives.

        Raises:
            ValueError: ``ttl`` is not positive.
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._apply(key, lambda state, now: model.advance(state, now, ticket, failed, ttl))

    def heartbeat(self, key: str, ticket: OrderedTicket) -> bool:
        """Restamp ``ticket``'s timer; ``False`` when fenced or the timer is gone.

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._apply(key, lambda state, now: model.heartbeat(state, now, ticket))

    def skip(self, key: str, nonce: int) -> int:
        """Operator escape hatch: force the cursor to ``nonce``; returns the cursor.

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        return self._apply(key, lambda state, now: model.skip(state, now, nonce))

    def reset(self, key: str) -> None:
        """Operator: delete everything, the epoch included.

        The document keeps the last epoch as a lapsed field for ``FENCE_RETENTION`` seconds
        (unreadable; peek shows zeros) so the next batch gets a greater epoch
        (docs/coordination.md#fencing-tokens).

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        self._apply(key, model.reset)

    def peek(self, key: str) -> OrderedLockState:
        """Read the state without changing it (all zeros but the epoch when drained)."""
        return self._states.read(key, model.peek)
