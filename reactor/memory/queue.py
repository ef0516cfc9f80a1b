"""``MemoryQueue``: the in-process :class:`~reactor.ports.queues.QueuePrimitive` (the reference
implementation, docs/protocol.md, "Building a router").

:class:`reactor.generic.router.GenericRouter` over a ``MemoryQueue`` is a complete router; the
``local://`` router (:class:`reactor.memory.LocalRouter`) is exactly that plus embedded
workers, and ``memqueue://`` builds the bare generic router over it. Every operation runs under
one lock, so each is atomic; a condition on that lock wakes a waiting ``receive`` when a
message is put or released (:class:`~reactor.ports.queues.WaitsForMessages`).

Messages are kept in a dict with a due-heap of ``(visible_at, sequence, id, version)`` entries
(the version is the entry's sequence number, unique in the queue); an entry whose version is
not the message's current one is stale and skipped. Dead letters are
a :class:`DeadLetterList`: ids are arrival numbers as text (``"1"``, ``"2"``, ...).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from reactor.errors import RouterError
from reactor.ports.inspection import QueueStats
from reactor.ports.queues import ClaimedMessage
from reactor.ports.router import DeadLetter

__all__ = ["DeadLetterList", "MemoryQueue"]


class DeadLetterList:
    """The dead letters of an in-process router or queue, by id in arrival order.

    Ids are arrival numbers as text (``"1"``, ``"2"``, ...), never reused, so a cursor stays
    meaningful after the letter it names is requeued or purged. Not locked: the owner holds
    its lock around every call.
    """

    def __init__(self) -> None:
        self._letters: dict[str, DeadLetter] = {}
        self._ids = itertools.count(1)

    def add(self, body: str | bytes, reason: str, at: float) -> DeadLetter:
        """Record a dead letter keeping ``body`` raw (:meth:`DeadLetter.from_raw`)."""
        letter = DeadLetter.from_raw(body, reason, at, str(next(self._ids)))
        self._letters[letter.id] = letter
        return letter

    def page(self, limit: int, cursor: str | None) -> list[DeadLetter]:
        """At most ``limit`` letters, oldest first, after the one whose id is ``cursor``.

        Raises:
            ValueError: ``cursor`` is not an id of this list's form.
        """
        if limit <= 0:
            return []
        after = _arrival(cursor) if cursor is not None else 0
        if after is None:
            raise ValueError(f"bad dead-letter cursor {cursor!r}: not a dead-letter id")
        out: list[DeadLetter] = []
        for letter in self._letters.values():
            if int(letter.id) > after:
                out.append(letter)
                if len(out) >= limit:
                    break
        return out

    def count(self) -> int:
        """How many letters are kept."""
        return len(self._letters)

    def get(self, letter_id: str) -> DeadLetter | None:
        """The letter with id ``letter_id``, else ``None``."""
        return self._letters.get(letter_id)

    def pop(self, letter_id: str) -> DeadLetter | None:
        """Remove and return the letter with id ``letter_id`` (``None`` when absent)."""
        return self._letters.pop(letter_id, None)

    def purge(self, ids: Sequence[str] | None) -> int:
        """Remove the letters named by ``ids`` (``None``: all); returns how many went."""
        if ids is None:
            count = len(self._letters)
            self._letters.clear()
            return count
        return sum(self._letters.pop(letter_id, None) is not None for letter_id in set(ids))


def _arrival(letter_id: str) -> int | None:
    """The arrival number of an in-process dead-letter id, ``None`` when it is not one."""
    return int(letter_id) if letter_id.isascii() and letter_id.isdigit() else None


@dataclass(slots=True)
class _Message:
    body: str | bytes
    visible_at: float
    receive_count: int = 0
    receipt: str | None = None
    version: int = 0


class MemoryQueue:
    """An in-process :class:`~reactor.ports.queues.QueuePrimitive` (and
    :class:`~reactor.ports.queues.WaitsForMessages`).

    After :meth:`close`, :meth:`put` raises :class:`RouterError`; the other operations keep
    working on what is stored (nothing is released: it is all in memory).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._messages: dict[str, _Message] = {}
        self._heap: list[tuple[float, int, str, int]] = []
        self._seq = itertools.count()
        self._receipts = itertools.count(1)
        self._dead = DeadLetterList()
        self._closed = False

    # -- messages ------------------------------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Add a message unless ``message_id`` is queued (see the protocol).

        Raises:
            RouterError: the queue is closed.
        """
        with self._cond:
            if self._closed:
                raise RouterError("the in-memory queue is closed")
            if message_id in self._messages:
                return False
            message = _Message(body=body, visible_at=visible_at)
            self._messages[message_id] = message
            self._schedule(message_id, message)
            return True

    def _push(self, message_id: str, message: _Message) -> None:
        """Give the message a new version, from the queue's sequence (never reused, not even
        by a later message under the same id: a due entry left by a deleted message can never
        pass for the current one), and push its due entry (caller holds the lock)."""
        message.version = next(self._seq)
        heapq.heappush(self._heap, (message.visible_at, message.version, message_id,
                                    message.version))

    def _schedule(self, message_id: str, message: _Message) -> None:
        """Push the message's current due entry and wake waiters (caller holds the lock)."""
        self._push(message_id, message)
        self._cond.notify_all()

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """Hand out up to ``limit`` visible messages, earliest due first (see the protocol)."""
        out: list[ClaimedMessage] = []
        with self._cond:
            while len(out) < limit and self._heap and self._heap[0][0] <= now:
                _, _, message_id, version = heapq.heappop(self._heap)
                message = self._messages.get(message_id)
                if message is None or message.version != version:
                    continue  # superseded entry (deleted, claimed, released or extended)
                message.receive_count += 1
                message.receipt = str(next(self._receipts))
                message.visible_at = visible_at
                self._push(message_id, message)
                out.append(
                    ClaimedMessage(
                        message_id=message_id, body=message.body,
                        receive_count=message.receive_count, receipt=message.receipt,
                    )
                )
        return out

    def _current(self, message_id: str, receipt: str) -> _Message | None:
        """The message when ``receipt`` is its current receipt (caller holds the lock)."""
        message = self._messages.get(message_id)
        if message is None or message.receipt is None or message.receipt != receipt:
            return None
        return message

    def delete(self, message_id: str, receipt: str) -> bool:
        """Remove the message if ``receipt`` is current (see the protocol)."""
        with self._cond:
            if self._current(message_id, receipt) is None:
                return False
            del self._messages[message_id]
            return True

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Move the lease end if ``receipt`` is current; the receipt stays (see the protocol)."""
        with self._cond:
            message = self._current(message_id, receipt)
            if message is None:
                return False
            message.visible_at = visible_at
            self._schedule(message_id, message)
            return True

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Give the message back if ``receipt`` is current, revoking it (see the protocol)."""
        with self._cond:
            message = self._current(message_id, receipt)
            if message is None:
                return False
            message.receipt = None
            message.visible_at = visible_at
            self._schedule(message_id, message)
            return True

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Move the message to the dead letters if ``receipt`` is current (see the protocol)."""
        with self._cond:
            message = self._current(message_id, receipt)
            if message is None:
                return False
            del self._messages[message_id]
            self._dead.add(message.body, reason, at)
            return True

    # -- dead letters --------------------------------------------------------------------------

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """Letters in arrival order after id ``after`` (see the protocol).

        Raises:
            ValueError: ``after`` is not an arrival number.
        """
        with self._cond:
            return self._dead.page(limit, after)

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """The letter with id ``letter_id``, else ``None``."""
        with self._cond:
            return self._dead.get(letter_id)

    def remove_dead_letter(self, letter_id: str) -> bool:
        """Remove one letter; ``True`` only for the caller that removed it."""
        with self._cond:
            return self._dead.pop(letter_id) is not None

    # -- waiting and lifecycle -------------------------------------------------------------------

    def wait_for_messages(self, timeout: float) -> None:
        """Block until a message is put, released or re-timed, or :meth:`wake`, or ``timeout``
        real seconds pass."""
        with self._cond:
            if not self._closed:
                self._cond.wait(timeout)

    def wake(self) -> None:
        """Wake every :meth:`wait_for_messages` caller now."""
        with self._cond:
            self._cond.notify_all()

    def size(self) -> int:
        """Messages not yet deleted or dead-lettered (visible, delayed or claimed)."""
        with self._cond:
            return len(self._messages)

    def counts(self, now: float) -> QueueStats:
        """The messages by state at ``now`` (epoch seconds): ``ready`` (visible: never claimed,
        released and due, or a lapsed lease), ``delayed`` (not yet due, not claimed),
        ``in_flight`` (claimed, lease running) and ``dead_letters``; ``consumers`` unknown.
        """
        ready = delayed = in_flight = 0
        with self._cond:
            for message in self._messages.values():
                if message.visible_at <= now:
                    ready += 1
                elif message.receipt is None:
                    delayed += 1
                else:
                    in_flight += 1
            dead = self._dead.count()
        return QueueStats(ready=ready, delayed=delayed, in_flight=in_flight, dead_letters=dead)

    def queued(self) -> list[tuple[float, str | bytes]]:
        """``(visible_at, body)`` of every message not yet deleted or dead-lettered (visible,
        delayed or claimed), earliest first (tests inspect a queue with it)."""
        with self._cond:
            entries = [(m.visible_at, m.body) for m in self._messages.values()]
        return sorted(entries, key=lambda entry: entry[0])

    def close(self) -> None:
        """Refuse further puts and wake the waiters; idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
