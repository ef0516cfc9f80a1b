"""``QueuePrimitive``: the smallest thing a router adapter can implement (docs/protocol.md,
"Building a router").

:class:`reactor.generic.router.GenericRouter` builds a whole :class:`~reactor.ports.router.Router`
(and :class:`~reactor.ports.router.DeadLetterAdmin`) over one primitive, as
:class:`reactor.generic.storage.GenericStorage` builds a storage over a
:class:`~reactor.ports.documents.DocumentStore`. The primitive knows nothing of jobs: it keeps
opaque message bodies with a visibility time, hands them out under receipts, and keeps a list
of dead letters. The generic router does the rest: job envelopes, delays, leases, retries,
the stale-receipt rule, poison messages and dead-letter administration.

**Messages.** A message is ``(message_id, body, visible_at, receive_count, receipt)``.
``message_id`` is chosen by the caller (unique per queue), ``body`` is stored verbatim (text;
bytes where the transport is binary-safe), ``visible_at`` is epoch seconds judged against the
``now`` the caller passes (the primitive reads no clock), ``receive_count`` counts claims and
``receipt`` is the token of the latest claim (``None`` before the first claim and after a
:meth:`QueuePrimitive.release`).

**Atomicity.** Each operation is atomic on its own and linearizable per message: two callers
racing on one message see one of them win, never a mix (one transaction, one conditional
update, one script, or one lock). No operation spans two messages atomically, except that a
claim of several messages may be several single-message claims.

**Errors.** A backend failure raises :class:`~reactor.errors.RouterError` with the driver's
exception chained. A receipt or an id that no longer names a message is not an error: the
operation returns ``False`` (or ``None``) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from reactor.ports.router import DeadLetter

__all__ = [
    "ClaimedMessage",
    "ClaimsWaiting",
    "PurgesDeadLetters",
    "PutsMany",
    "QueuePrimitive",
    "RequeuesDeadLetters",
    "WaitsForMessages",
]


@dataclass(frozen=True, slots=True)
class ClaimedMessage:
    """One message handed out by :meth:`QueuePrimitive.claim`.

    Attributes:
        message_id: the id the message was put with.
        body: the body exactly as put (``str``; ``bytes`` only if a ``bytes`` body was put).
        receive_count: how many times the message was claimed, this claim included (1 on the
            first claim; a :meth:`QueuePrimitive.release` keeps the count).
        receipt: the token of this claim, opaque; it names this claim to :meth:`delete`,
            :meth:`change_visibility`, :meth:`release` and :meth:`dead_letter` until the
            message is claimed again or released.
        problem: why this message cannot be a job although its body may parse (a Redis
            stream entry without a ``body`` field, whose ``body`` is then a dump of its
            fields); ``None`` for every well-formed message. The generic router dead-letters
            a message with a problem, the problem as its reason.
    """

    message_id: str
    body: str | bytes
    receive_count: int
    receipt: str
    problem: str | None = None


@runtime_checkable
class QueuePrimitive(Protocol):
    """A queue of opaque messages with visibility times, receipts and a dead-letter list.

    Nine operations (plus :meth:`close`): six on messages, three on dead letters. See the
    module docstring for the message model, atomicity and errors.
    """

    # -- messages ------------------------------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Add a message, unless one with ``message_id`` is queued already.

        Atomic insert-if-absent: of two puts of one id, one adds the message and the other
        changes nothing. The generic router puts fresh ids for new jobs and, for a requeued
        dead letter, an id derived from the letter's, so a repeated requeue adds it once.

        Args:
            message_id: the message's id, unique in this queue (at most 200 characters of
                ASCII letters, digits, ``-``, ``_``, ``:`` and ``.``).
            body: the body to store verbatim.
            visible_at: epoch seconds from which the message may be claimed.

        Returns:
            ``True`` when the message was added, ``False`` when that id is already queued.

        Raises:
            RouterError: the backend failed, or the primitive is closed.
        """
        ...

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """Hand out up to ``limit`` messages whose ``visible_at <= now``.

        Each claimed message atomically gets ``visible_at`` (the lease end), its
        ``receive_count`` plus one and a fresh receipt that no earlier claim of any message
        had. A message goes to one claimer only: two concurrent claims never both return it
        (until its new ``visible_at`` passes). Messages should come out earliest ``visible_at``
        first, and in put order among equals, where the backend can order them; a primitive
        that cannot order still must not starve a visible message forever.

        Args:
            limit: the most messages returned (``>= 1``).
            now: the caller's clock, epoch seconds.
            visible_at: the new visibility time of every claimed message (``now`` plus the
                lease).

        Returns:
            The claimed messages (none when nothing is visible).

        Raises:
            RouterError: the backend failed.
        """
        ...

    def delete(self, message_id: str, receipt: str) -> bool:
        """Remove a message for good, only if ``receipt`` is its current receipt.

        Returns:
            ``True`` when it was removed; ``False`` (nothing changed) when the message is gone
            or was claimed again or released since.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Set a message's ``visible_at``, only if ``receipt`` is current; the receipt stays
        current (a lease extension).

        Returns:
            ``True`` when it was changed, ``False`` (nothing changed) on a stale receipt.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Give a claimed message back, only if ``receipt`` is current: set its ``visible_at``
        and revoke the receipt (no receipt names the message until its next claim). The body
        and ``receive_count`` are kept.

        Returns:
            ``True`` when it was released, ``False`` (nothing changed) on a stale receipt.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Move a message to the dead-letter list, only if ``receipt`` is current.

        One atomic step: the message leaves the queue and its body is appended to the
        dead-letter list with ``reason`` and ``at`` under a new letter id, or nothing happens.

        Letter ids are unique and never reused, and they sort in the order the letters were
        added (a counter, or a time-ordered id); :meth:`dead_letters` pages in that order.

        Args:
            message_id: the message.
            receipt: its current receipt.
            reason: why it is dead.
            at: epoch seconds, the time of death.

        Returns:
            ``True`` when the message was moved, ``False`` (nothing changed) on a stale
            receipt.

        Raises:
            RouterError: the backend failed.
        """
        ...

    # -- dead letters --------------------------------------------------------------------------

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """Dead letters in the order they were added, after the letter whose id is ``after``.

        Build each one with :meth:`DeadLetter.from_raw` (``letter_id`` set) so a body that is
        not UTF-8 is kept as base64.

        Args:
            after: a letter id (``None``: from the oldest); the page holds the letters added
                after it, whether or not that letter still exists (where the id's form lets
                the backend place it).
            limit: the most letters returned (``>= 1``).

        Returns:
            At most ``limit`` letters, oldest first.

        Raises:
            ValueError: ``after`` is not a letter id this primitive can place.
            RouterError: the backend failed.
        """
        ...

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """One dead letter by id; ``None`` when there is none (or ``letter_id`` is malformed).

        Raises:
            RouterError: the backend failed.
        """
        ...

    def remove_dead_letter(self, letter_id: str) -> bool:
        """Remove one dead letter for good.

        Atomic: of concurrent removals of one id, exactly one returns ``True``. The generic
        router's requeue and purge both rely on it.

        Returns:
            ``True`` when this call removed it, ``False`` when there was none by that id.

        Raises:
            RouterError: the backend failed.
        """
        ...

    def close(self) -> None:
        """Release connections; idempotent. Later :meth:`put` calls may raise
        :class:`~reactor.errors.RouterError`."""
        ...


@runtime_checkable
class WaitsForMessages(Protocol):
    """An optional capability of a :class:`QueuePrimitive`: block until a message may have
    arrived, instead of the generic router polling.

    :class:`reactor.generic.router.GenericRouter` calls :meth:`wait_for_messages` between two
    empty claims of one ``receive``; without the capability it sleeps its poll interval.
    """

    def wait_for_messages(self, timeout: float) -> None:
        """Return when a message was put or released (or a visibility changed), or after
        ``timeout`` seconds, whichever comes first; spurious early returns are allowed.

        Args:
            timeout: the longest wait, in real seconds (``> 0``).
        """
        ...


@runtime_checkable
class RequeuesDeadLetters(Protocol):
    """An optional capability of a :class:`QueuePrimitive` whose :meth:`QueuePrimitive.put`
    cannot refuse a second put of one id (an SQS standard queue): it requeues a dead letter
    itself, under a claim of its own.

    :class:`reactor.generic.router.GenericRouter` checks the letter's body first (a body that
    is not a job envelope is refused and kept) and then calls :meth:`requeue_dead_letter`
    instead of its put-then-remove rule (docs/protocol.md, "Building a router").
    """

    def requeue_dead_letter(self, letter_id: str, visible_at: float) -> bool:
        """Claim the letter, put its body back as a new message (a fresh receive count)
        visible from ``visible_at``, then remove the letter.

        Of concurrent requeues of one letter, one gets ``True`` and enqueues the body, as far
        as the backend's claim holds; a crash after the put leaves the letter to be requeued
        again (at least once, never lost).

        Args:
            letter_id: the letter.
            visible_at: epoch seconds from which the message may be claimed.

        Returns:
            ``True`` when this call requeued it; ``False`` when there is no such letter (or
            another caller holds its claim).

        Raises:
            RouterError: the backend failed (the letter is kept).
        """
        ...


@runtime_checkable
class ClaimsWaiting(Protocol):
    """An optional capability of a :class:`QueuePrimitive` whose backend can block a claim
    until messages arrive (SQS long polling).

    :class:`reactor.generic.router.GenericRouter` makes each claim of a waiting ``receive``
    through :meth:`claim_waiting` with the time left, instead of claiming, pausing and
    claiming again: one request per wait.
    """

    def claim_waiting(
        self, limit: int, now: float, visible_at: float, wait_seconds: float
    ) -> list[ClaimedMessage]:
        """:meth:`QueuePrimitive.claim`, except that when nothing is visible it blocks up to
        ``wait_seconds`` (real seconds; the backend may cap or round it) and returns as soon
        as messages arrive.

        Raises:
            RouterError: the backend failed.
        """
        ...



@runtime_checkable
class PutsMany(Protocol):
    """An optional capability of a :class:`QueuePrimitive` that adds several messages in one
    request. :class:`reactor.generic.router.GenericRouter` then offers
    :class:`~reactor.ports.capabilities.EnqueuesMany` as one call (docs/protocol.md,
    "Optional fast paths"); without it, ``enqueue_many`` puts the jobs one by one.
    """

    def put_many(
        self, message_ids: Sequence[str], bodies: Sequence[str | bytes], visible_at: float
    ) -> None:
        """:meth:`QueuePrimitive.put` of every ``(message_ids[i], bodies[i])``, in order, all
        visible from ``visible_at``, as one request where the backend can.

        Raises:
            RouterError: the backend failed (any subset may be added).
        """
        ...


@runtime_checkable
class PurgesDeadLetters(Protocol):
    """An optional capability of a :class:`QueuePrimitive` that deletes many dead letters in
    one request (a Redis ``DEL`` of the dead-letter stream). :class:`GenericRouter
    <reactor.generic.router.GenericRouter>` calls it for ``purge_dead_letters`` instead of
    removing letter by letter.
    """

    def purge_dead_letters(self, ids: Sequence[str] | None) -> int:
        """Delete the letters named by ``ids`` (``None``: every one); ids that name no letter
        (or are malformed) are skipped.

        Returns:
            How many letters this call deleted.

        Raises:
            RouterError: the backend failed.
        """
        ...
