"""``GenericProbe``: the contract-suite probe of every :class:`reactor.generic.GenericStorage`.

An adapter built on :class:`reactor.generic.storage.GenericStorage` stores everything in one
:class:`reactor.ports.DocumentStore`. Its probe only needs a **document backdoor**
(:class:`DocumentBackdoor`: read a physically stored document, rewrite its expiry) and this
module's concern -> document mapping, which is the *only* place that knows which collections
and keys the generic stores use (their modules document the layouts).

A backdoor is usually the adapter's own document store with two extra methods (``raw`` and
``set_expiry``): :class:`reactor.memory.MemoryDocumentStore` and the SQLite example both have
them. Values are rewritten (semaphore leases, ordered-lock timers, coordination expiries)
through the document store's own compare-and-set, never through the sub-store under test.

Locks and ordered locks outlive their logical expiry by ``FENCE_RETENTION`` seconds (their
document keeps the fencing token or epoch, docs/coordination.md#fencing-tokens): ``ttl`` of a
lock reports the lock's own expiry, and the member :data:`~reactor_contract.probe.FENCE`
addresses the whole document, retained fence included.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from reactor.generic.claims import (
    CORRELATIONS,
    IDEMPOTENCY,
    INTERRUPT_ATTEMPTS,
    INTERRUPT_RESUMES,
    idempotency_document_key,
)
from reactor.generic.contexts import (
    CONTEXT_PAGES,
    CONTEXT_SEGMENTS,
    CONTEXTS,
    OLDEST_PIECE_FIELD,
    PAGE_UNTIL_FIELD,
    context_page_key,
)
from reactor.generic.locks import LOCK_CODEC, LOCKS
from reactor.generic.map_rollbacks import (
    MAP_ROLLBACK_OUTCOMES,
    MAP_ROLLBACK_SEEN,
    MAP_ROLLBACKS,
)
from reactor.generic.maps import MAP_ELEMENTS, MAP_SLOTS, MAP_STATE, MAPS, position_key
from reactor.generic.ordered_locks import ORDERED_LOCK_CODEC, ORDERED_LOCKS
from reactor.generic.periods import PERIOD_CODEC, PERIODS
from reactor.generic.rate_limits import RATE_LIMIT_CODEC, RATE_LIMITS
from reactor.generic.semaphores import SEMAPHORE_CODEC, SEMAPHORES
from reactor.generic.step_results import STEP_RESULTS
from reactor.model.coordination import locks as lock_model
from reactor.model.coordination import semaphores as semaphore_model
from reactor.ports.documents import DocumentStore
from reactor.ports.storage import Storage
from reactor_contract.model_expiry import ORDERED_FIELDS, shift_expiry
from reactor_contract.probe import CONCERNS, FENCE

__all__ = ["DocumentBackdoor", "GenericProbe", "NamespaceCleanup", "RawDocumentLike"]

_MAP_STATE_MEMBERS = ("offset", "failed", "owner_signal", "elements")


@runtime_checkable
class RawDocumentLike(Protocol):
    """What :meth:`DocumentBackdoor.raw` returns: a physically stored document."""

    @property
    def value(self) -> Mapping[str, Any]:
        """The stored document."""
        ...

    @property
    def version(self) -> str:
        """The stored version token."""
        ...

    @property
    def expires_at(self) -> float | None:
        """Epoch seconds after which it reads as absent, ``None`` = never."""
        ...

    @property
    def index(self) -> str | None:
        """The ``index`` it was written with."""
        ...


@runtime_checkable
class DocumentBackdoor(Protocol):
    """Direct access to a document store's rows, bypassing logical expiry."""

    def raw(self, collection: str, key: str) -> RawDocumentLike | None:
        """The physically stored document, expired or not; ``None`` when nothing is stored."""
        ...

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a stored document's expiry in place; ``False`` when nothing is stored."""
        ...


@runtime_checkable
class NamespaceCleanup(Protocol):
    """Deleting and listing everything a document store keeps under its namespace (its
    prefix), for :class:`reactor_contract.probe.CleanupProbe` (docs/contract-suite.md,
    "Cleanup: nothing left behind")."""

    def purge_namespace(self) -> int:
        """Delete every document (expired ones included) and every backend object of the
        namespace; returns how many were deleted."""
        ...

    def leftovers(self) -> list[str]:
        """Names of what the namespace still holds, sorted; ``[]`` after a purge."""
        ...


#: Coordination concerns: (collection, codec). The generic stores' default collections.
_COORDINATION: dict[str, tuple[str, Any]] = {
    "lock": (LOCKS, LOCK_CODEC),
    "semaphore": (SEMAPHORES, SEMAPHORE_CODEC),
    "rate_limit": (RATE_LIMITS, RATE_LIMIT_CODEC),
    "period": (PERIODS, PERIOD_CODEC),
    "ordered_lock": (ORDERED_LOCKS, ORDERED_LOCK_CODEC),
}


def _idempotency_doc_key(key: str) -> str:
    """``"<reactor>:<user key>"`` -> the generic claim store's document key."""
    reactor, sep, user_key = key.partition(":")
    if not sep:
        raise KeyError(f"idempotency probe keys look like '<reactor>:<key>', got {key!r}")
    return idempotency_document_key(reactor, user_key)


def _member_ttl(concern: str, state: Any, member: str) -> float | None:
    """The expiry (epoch seconds) of one member of a coordination state, ``inf`` = never."""
    if concern == "semaphore":
        assert isinstance(state, semaphore_model.SemaphoreLeases)
        if member not in state.holders:
            return None
        return float(state.holders[member])
    if concern == "ordered_lock" and member in ORDERED_FIELDS:
        item = getattr(state, ORDERED_FIELDS[member])
        if item is None:
            return None
        return math.inf if item.expires_at is None else float(item.expires_at)
    raise KeyError(f"{concern} has no member {member!r} with a TTL")


class GenericProbe:
    """A :class:`reactor_contract.probe.Probe` for adapters built on ``GenericStorage``.

    Args:
        documents: the adapter's :class:`reactor.ports.DocumentStore` (``storage.documents``).
        backdoor: raw access to the same rows; defaults to ``documents`` itself when it has
            ``raw`` and ``set_expiry``.
        clocked: the optional :class:`reactor_contract.probe.ClockProbe` capability: builds a
            storage of the adapter over the same records whose clock is the given
            ``() -> epoch seconds`` callable (``None``: :meth:`with_clock` returns ``None``;
            docs/coordination.md#clock-skew).
        clocked_documents: the optional :class:`reactor_contract.probe.DocumentsClockProbe`
            capability: builds the adapter's document store over the same rows judged by the
            given clock (``None``: :meth:`documents_with_clock` returns ``None``).
        cleanup: the optional :class:`reactor_contract.probe.CleanupProbe` capability: empties
            and lists the namespace; defaults to the backdoor when it has ``purge_namespace``
            and ``leftovers`` (``None`` otherwise: :meth:`purge_namespace` returns ``None``).
        drivers: the optional :class:`reactor_contract.probe.DriverProbe` capability: the
            ``(owner, attribute)`` pairs naming the driver clients the document store sends
            its requests through (``None``: :meth:`driver_clients` returns ``None`` and the
            ``driver_faults`` row shows a gap; docs/contract-suite.md, "Faults injected at
            the driver").

    Raises:
        TypeError: no backdoor was given and ``documents`` has none.
    """

    def __init__(
        self,
        documents: DocumentStore,
        backdoor: DocumentBackdoor | None = None,
        *,
        clocked: Callable[[Callable[[], float]], Storage | None] | None = None,
        clocked_documents: Callable[[Callable[[], float]], DocumentStore | None] | None = None,
        cleanup: NamespaceCleanup | None = None,
        drivers: Sequence[tuple[object, str]] | None = None,
    ) -> None:
        self._clocked = clocked
        self._clocked_documents = clocked_documents
        self._drivers = None if drivers is None else list(drivers)
        if cleanup is None:
            for candidate in (backdoor, documents):
                if isinstance(candidate, NamespaceCleanup):
                    cleanup = candidate
                    break
        self._cleanup = cleanup
        if backdoor is None:
            if not isinstance(documents, DocumentBackdoor):
                raise TypeError(
                    "GenericProbe needs a DocumentBackdoor (raw + set_expiry); pass backdoor="
                )
            backdoor = documents
        self.documents = documents
        self.backdoor = backdoor

    def driver_clients(self) -> list[tuple[object, str]] | None:
        """The ``drivers`` given (:class:`reactor_contract.probe.DriverProbe`), or ``None``."""
        return None if self._drivers is None else list(self._drivers)

    # -- the concern -> document mapping (the one place that knows the generic layout) -------

    def _prefixed(self, collection: str, prefix: str) -> Iterator[str]:
        """Live keys of ``collection`` that start with ``prefix`` (a key-range scan)."""
        after = prefix
        while True:
            page = self.documents.scan(collection, after=after, limit=500)
            for key, _value in page:
                if not key.startswith(prefix):
                    return
                yield key
            if len(page) < 500:
                return
            after = page[-1][0]

    def _indexed(self, collection: str, index: str) -> list[str]:
        return [key for key, _ in self.documents.scan(collection, index=index, limit=1_000_000)]

    def documents_of(
        self, concern: str, key: str, member: str | None = None
    ) -> list[tuple[str, str]]:
        """The ``(collection, document key)`` pairs holding ``concern``/``key`` (/``member``).

        Raises:
            KeyError: unknown concern or member.
        """
        if concern not in CONCERNS:
            raise KeyError(f"unknown probe concern {concern!r}")
        if concern in _COORDINATION:
            return [(_COORDINATION[concern][0], key)]
        if member is not None and concern not in ("map", "map_rollback", "interrupt"):
            raise KeyError(f"{concern} has no members, got {member!r}")
        if concern == "context":
            pieces = [(CONTEXT_SEGMENTS, k) for k, _ in self.documents.scan(
                CONTEXT_SEGMENTS, after=key + "/", limit=1_000_000) if k.startswith(key + "/")]
            return [(CONTEXTS, key), *self._context_page(key), *pieces]
        if concern == "step_result":
            return [(STEP_RESULTS, key)]
        if concern == "correlation":
            return [(CORRELATIONS, key)]
        if concern == "idempotency":
            return [(IDEMPOTENCY, _idempotency_doc_key(key))]
        if concern == "interrupt":
            if member not in (None, "resume", "attempts"):
                raise KeyError(f"interrupt members are 'resume' and 'attempts', got {member!r}")
            docs = []
            if member in (None, "resume"):
                docs.append((INTERRUPT_RESUMES, key))
            if member in (None, "attempts"):
                docs.append((INTERRUPT_ATTEMPTS, key))
            return docs
        if concern == "map":
            return self._map_documents(key, member)
        return self._rollback_documents(key, member)

    def _context_page(self, context_id: str) -> list[tuple[str, str]]:
        """The page-summary document of a top-level run (none for a child or an absent run).

        The key comes from the stored context's ``created_at`` (read through the backdoor when
        the context has logically expired) and :func:`reactor.generic.contexts.context_page_key`.
        """
        doc = self.documents.read(CONTEXTS, context_id).value
        if doc is None and self.backdoor is not None:
            row = self.backdoor.raw(CONTEXTS, context_id)
            doc = None if row is None else row.value
        if doc is None or doc.get("parent_context_id") is not None:
            return []
        return [(CONTEXT_PAGES, context_page_key(float(doc["created_at"]), context_id))]

    def _map_documents(self, map_id: str, member: str | None) -> list[tuple[str, str]]:
        if member in ("metadata", "counter"):
            return [(MAPS, map_id)]
        if member in _MAP_STATE_MEMBERS:
            return [(MAP_STATE, f"{map_id}:{member}")]
        if member is not None and member.startswith("slot:"):
            return [(MAP_SLOTS, position_key(map_id, int(member[5:])))]
        if member is not None and member.startswith("element:"):
            return [(MAP_ELEMENTS, position_key(map_id, int(member[8:])))]
        if member == "slots":
            return [(MAP_SLOTS, k) for k in self._indexed(MAP_SLOTS, map_id)]
        if member is not None:
            raise KeyError(f"unknown map member {member!r}")
        return [
            (MAPS, map_id),
            *((MAP_STATE, f"{map_id}:{name}") for name in _MAP_STATE_MEMBERS),
            *((MAP_SLOTS, k) for k in self._indexed(MAP_SLOTS, map_id)),
            *((MAP_ELEMENTS, k) for k in self._indexed(MAP_ELEMENTS, map_id)),
        ]

    def _rollback_documents(self, map_id: str, member: str | None) -> list[tuple[str, str]]:
        if member in ("metadata", "offset", "handed_off", "signal"):
            return [(MAP_ROLLBACKS, map_id)]
        if member is not None and member.startswith("outcome:"):
            return [(MAP_ROLLBACK_OUTCOMES, position_key(map_id, int(member[8:])))]
        if member is not None and member.startswith("seen:"):
            return [(MAP_ROLLBACK_SEEN, position_key(map_id, int(member[5:])))]
        if member is not None:
            raise KeyError(f"unknown map_rollback member {member!r}")
        return [
            (MAP_ROLLBACKS, map_id),
            *((MAP_ROLLBACK_OUTCOMES, k) for k in self._indexed(MAP_ROLLBACK_OUTCOMES, map_id)),
            *((MAP_ROLLBACK_SEEN, k) for k in self._prefixed(MAP_ROLLBACK_SEEN, f"{map_id}:")),
        ]

    # -- the Probe protocol ---------------------------------------------------------------------

    def with_clock(self, clock: Callable[[], float]) -> Storage | None:
        """The adapter's storage over the same records, judging time by ``clock``.

        Args:
            clock: ``() -> epoch seconds``, read for every decision of the new storage.

        Returns:
            What the adapter's ``clocked`` factory builds, or ``None`` without one (see
            :class:`reactor_contract.probe.ClockProbe`; docs/coordination.md#clock-skew).
        """
        return None if self._clocked is None else self._clocked(clock)

    def documents_with_clock(self, clock: Callable[[], float]) -> DocumentStore | None:
        """The adapter's document store over the same rows, judging time by ``clock``.

        Returns:
            What the adapter's ``clocked_documents`` factory builds, or ``None`` without one
            (see :class:`reactor_contract.probe.DocumentsClockProbe`).
        """
        return None if self._clocked_documents is None else self._clocked_documents(clock)

    def purge_namespace(self) -> int | None:
        """Delete everything of the probed storage's namespace (``cleanup``), or ``None``
        without a ``cleanup`` (see :class:`reactor_contract.probe.CleanupProbe`)."""
        return None if self._cleanup is None else self._cleanup.purge_namespace()

    def leftovers(self) -> list[str] | None:
        """What the namespace still holds (``cleanup``), or ``None`` without a ``cleanup``."""
        return None if self._cleanup is None else self._cleanup.leftovers()

    def raw(self, concern: str, key: str) -> object | None:
        """``{"<collection>/<key>": stored document}`` for every stored document, or ``None``."""
        found: dict[str, Any] = {}
        for collection, doc_key in self.documents_of(concern, key):
            row = self.backdoor.raw(collection, doc_key)
            if row is not None:
                found[f"{collection}/{doc_key}"] = dict(row.value)
        return found or None

    def ttl(self, concern: str, key: str, member: str | None = None) -> float | None:
        """Smallest remaining lifetime (seconds) of the live documents; ``inf`` = never.

        A lock reports the hold's own expiry (``None`` once released or lapsed, although its
        document stays for the fence retention); the member ``"fence"`` of a lock or an ordered
        lock reports the document's, retention included.
        """
        now = self.documents.now()
        if concern == "lock" and member is None:
            collection, codec = _COORDINATION[concern]
            value = self.documents.read(collection, key).value
            held = None if value is None else lock_model.live(codec.decode(value), now)
            if held is None:
                return None
            return math.inf if held.expires_at is None else held.expires_at - now
        if member == FENCE and concern in ("lock", "ordered_lock"):
            member = None
        elif member is not None and concern in ("semaphore", "ordered_lock"):
            collection, codec = _COORDINATION[concern]
            value = self.documents.read(collection, key).value
            if value is None:
                return None
            at = _member_ttl(concern, codec.decode(value), member)
            if at is None or at <= now:
                return None
            return at - now
        remaining: list[float] = []
        for collection, doc_key in self.documents_of(concern, key, member):
            found = self.documents.read(collection, doc_key)
            if found.value is None:
                continue
            expires_at = found.expires_at
            remaining.append(math.inf if expires_at is None else expires_at - now)
        return min(remaining) if remaining else None

    def expire(
        self, concern: str, key: str, member: str | None = None, *, after: float = 0.0
    ) -> None:
        """Make the concern's live documents (or one member) lapse ``after`` seconds from now."""
        at = self.documents.now() + after
        if member == FENCE and concern in ("lock", "ordered_lock"):
            collection = _COORDINATION[concern][0]
            if self.backdoor.raw(collection, key) is not None:
                self._set_expiry(collection, key, at)
            return
        if concern in _COORDINATION:
            self._rewrite_state(
                concern, key, lambda state: shift_expiry(concern, state, at, member)
            )
            return
        for collection, doc_key in self.documents_of(concern, key, member):
            if self.documents.read(collection, doc_key).value is not None:
                self._set_expiry(collection, doc_key, at)
        if concern == "context":
            self._mark_context_renewals(key, at)

    def _set_expiry(self, collection: str, key: str, at: float) -> None:
        """The backdoor's ``set_expiry`` of a document just seen stored; a backdoor that finds
        nothing to move would make the test that asked for the expiry vacuous.

        Raises:
            RuntimeError: the backdoor reported that no document was stored there.
        """
        if not self.backdoor.set_expiry(collection, key, at):
            raise RuntimeError(
                f"probe backdoor set_expiry found no document {key!r} in {collection!r}, "
                "which the store had just returned"
            )

    def _mark_context_renewals(self, context_id: str, at: float) -> None:
        """Tell the context head that its pieces and page summary now expire at ``at`` (the
        store renews them by these marks, not on every write: reactor.generic.contexts)."""
        for _ in range(100):
            row = self.backdoor.raw(CONTEXTS, context_id)
            current = self.documents.read(CONTEXTS, context_id)
            if row is None or current.value is None:
                return
            head = dict(current.value)
            for field in (OLDEST_PIECE_FIELD, PAGE_UNTIL_FIELD):
                if field in head:
                    head[field] = at
            if self.documents.write(
                CONTEXTS, context_id, head, expected_version=current.version,
                expires_at=row.expires_at, index=row.index,
            ):
                return
        raise RuntimeError(f"probe could not rewrite context {context_id!r}: constant contention")

    def _rewrite_state(self, concern: str, key: str, change: Callable[[Any], Any]) -> None:
        """Decode a coordination document, change its model state, write it back (CAS)."""
        collection, codec = _COORDINATION[concern]
        for _ in range(100):
            row = self.backdoor.raw(collection, key)
            current = self.documents.read(collection, key)
            if row is None or current.value is None:
                return
            new_state = change(codec.decode(current.value))
            if self.documents.write(
                collection,
                key,
                codec.encode(new_state),
                expected_version=current.version,
                expires_at=codec.expiry(new_state),
                index=row.index,
            ):
                return
        raise RuntimeError(f"probe could not rewrite {concern} {key!r}: constant contention")
