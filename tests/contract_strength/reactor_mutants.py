"""Deliberately broken adapters: each one realistic bug the contract suite must reject.

Most mutants are the memory adapter (:class:`reactor.memory.MemoryStorage` over
:class:`reactor.memory.MemoryDocumentStore`, or :class:`reactor.memory.LocalRouter`) with one
method subclassed or patched; the backend mutants are the Redis adapter with one Lua script
edited (:class:`LuaPatch`, against ``$REACTOR_TEST_REDIS_URL``), or the SQLite example's, the
MongoDB (mongomock) or the DynamoDB (moto, ``$REACTOR_TEST_MOTO_URL``) document store, or the
MongoDB router (mongomock), with one method broken. They are reachable by URL,
``mutant://<name>`` for both the storage and the router, through entry points that only the
strength runner declares: it writes a throw-away ``.dist-info`` (see
:func:`write_entry_points`) into a temporary directory and puts it and this directory on the
``PYTHONPATH`` of the ``pytest --pyargs reactor_contract`` subprocess it starts. Nothing is
registered in the project's own metadata, so ``mutant://`` exists only inside those
subprocesses.

``mutant://none`` is the unbroken adapter (the runner's control run).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from reactor.generic._cas import StateCollection
from reactor.generic._durable import DurableCollection
from reactor.generic.claims import DocumentClaimStore
from reactor.generic.contexts import DocumentContextStore
from reactor.generic.locks import DocumentLockStore
from reactor.generic.map_rollbacks import DocumentMapRollbackStore
from reactor.generic.maps import DocumentMapStore
from reactor.generic.ordered_locks import DocumentOrderedLockStore
from reactor.generic.periods import DocumentPeriodStore
from reactor.generic.rate_limits import DocumentRateLimitStore
from reactor.generic.schedules import SCHEDULES, DocumentScheduleStore
from reactor.generic.semaphores import DocumentSemaphoreStore
from reactor.generic.step_results import DocumentStepResultStore
from reactor.memory import LocalRouter, MemoryStorage
from reactor.memory.documents import MemoryDocumentStore
from reactor.model.coordination import locks as lock_model
from reactor.model.coordination import periods as period_model
from reactor.model.coordination import semaphores as semaphore_model
from reactor.model.coordination._expiry import deadline
from reactor.model.records import (
    ContextRecord,
    LockInfo,
    MapRollbackMetadata,
    RateDecision,
    RateWindow,
    RollbackOutcome,
    RunPage,
    RunSummary,
    ScanPage,
    StepResultRecord,
)
from reactor.ports.documents import Versioned
from reactor.ports.router import Delivery, Job
from reactor.ports.serialization import record_from_dict, record_to_dict
from reactor.ports.storage import Storage

try:  # run by the strength runner's subprocesses as a top-level module, next to this one
    import declaration_mutants
except ImportError:  # imported by the runner itself, from the repository root
    from tests.contract_strength import declaration_mutants

__all__ = [
    "MUTANTS",
    "Mutant",
    "probe_for",
    "router_from_url",
    "router_probe_for",
    "storage_from_url",
    "write_entry_points",
]

COLLECTION_TTL = 86400.0


@dataclass(frozen=True)
class Mutant:
    """One broken adapter.

    Attributes:
        name: the ``mutant://<name>`` host.
        concern: the conformance-table row that should reject it.
        modules: the ``reactor_contract`` modules the runner runs against it (a failure there
            is a failure of the whole suite, which contains them).
        bug: the bug class, one line (the docstring of its class).
        kind: ``"storage"`` or ``"router"``.
        expect: text the failure output must contain (the message that teaches), if any.
        select: a ``-k`` expression narrowing the modules to the tests of the rule broken
            (router mutants: it skips the visibility-window waits of unrelated tests).
        backend: the adapter the mutant breaks when it is not the memory one: ``"redis"``
            (a Lua script), ``"sqlite"``, ``"mongomock"`` or ``"dynamodb"`` (moto).
    """

    name: str
    concern: str
    modules: tuple[str, ...]
    bug: str
    kind: str
    expect: str | None = None
    select: str | None = None
    backend: str | None = None


# -- document stores ---------------------------------------------------------------------------


class _Docs(MemoryDocumentStore):
    """A memory document store whose clocked views keep the mutation (probes' ``with_clock``)."""

    def __init__(self, clock: Callable[[], float] = time.time, **kw: Any) -> None:
        super().__init__(clock, **kw)
        self._lock = threading.RLock()  # type: ignore[assignment]

    def with_clock(self, clock: Callable[[], float]) -> MemoryDocumentStore:
        view = type(self)(clock)
        view._lock = self._lock
        view._collections = self._collections
        for name, value in vars(self).items():
            if name.startswith("m_"):
                setattr(view, name, value)
        return view


class CounterVersions(_Docs):
    """Versions are per-key counters that restart at 1 after a delete (ABA)."""

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
              expected_version: str | None, expires_at: float | None,
              index: str | None = None) -> bool:
        with self._lock:
            if not super().write(collection, key, value, expected_version=expected_version,
                                 expires_at=expires_at, index=index):
                return False
            doc = self._doc(collection, key)
            if doc is not None:
                doc.version = str(int(expected_version or 0) + 1)
            return True


class ScanAfterInclusive(_Docs):
    """Keyset scan uses ``>=`` instead of ``>`` for ``after`` (pagers never advance)."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        rows = super().scan(collection, index=index, limit=1 << 30)
        return [(k, v) for k, v in rows if after is None or k >= after][: max(limit, 0)]


class ScanUnordered(_Docs):
    """Scan without ORDER BY: keys come back in storage (hash-like) order."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        rows = super().scan(collection, index=index, after=after, limit=1 << 30)
        return sorted(rows, key=lambda row: row[0][::-1])[: max(limit, 0)]


class MillisecondClock(_Docs):
    """The document store's clock is in milliseconds, not epoch seconds."""

    def now(self) -> float:
        return super().now() * 1000.0


class CasIgnoresExpectedVersion(_Docs):
    """Compare-and-set ignores ``expected_version``: every write wins (last writer wins)."""

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
              expected_version: str | None, expires_at: float | None,
              index: str | None = None) -> bool:
        with self._lock:
            current = self.read(collection, key).version
            return super().write(collection, key, value, expected_version=current,
                                 expires_at=expires_at, index=index)


class InsertIsUpsert(_Docs):
    """``expected_version=None`` overwrites a stored document (an upsert, not insert-if-absent)."""

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
              expected_version: str | None, expires_at: float | None,
              index: str | None = None) -> bool:
        with self._lock:
            if expected_version is None:
                expected_version = self.read(collection, key).version
            return super().write(collection, key, value, expected_version=expected_version,
                                 expires_at=expires_at, index=index)


class UnconditionalDelete(_Docs):
    """A delete ignores ``expected_version`` (``DELETE ... WHERE key = ?`` only)."""

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
              expected_version: str | None, expires_at: float | None,
              index: str | None = None) -> bool:
        with self._lock:
            if value is None:
                expected_version = self.read(collection, key).version
            return super().write(collection, key, value, expected_version=expected_version,
                                 expires_at=expires_at, index=index)


class ExpiredStillReadable(_Docs):
    """``read`` returns a document whose ``expires_at`` has passed (expiry left to a TTL job)."""

    def read(self, collection: str, key: str) -> Versioned:
        found = super().read(collection, key)
        raw = self.raw(collection, key)
        if found.value is None and raw is not None:
            return Versioned(raw.value, raw.version, raw.expires_at)
        return found


class ExpiryBoundaryExclusive(_Docs):
    """A document with ``expires_at == now`` still reads as live (``<`` instead of ``<=``)."""

    def read(self, collection: str, key: str) -> Versioned:
        with self._lock:
            found = super().read(collection, key)
            raw = self.raw(collection, key)
            if found.value is None and raw is not None and raw.expires_at == self.now():
                return Versioned(raw.value, raw.version, raw.expires_at)
            return found


class ExpiredHidesVersion(_Docs):
    """An expired document reads with ``version=None``, so nobody can take it over."""

    def read(self, collection: str, key: str) -> Versioned:
        found = super().read(collection, key)
        return Versioned(None, None) if found.value is None else found


class ScanIgnoresExpiry(_Docs):
    """``scan`` lists expired documents (no expiry filter in the query)."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        out: list[tuple[str, Mapping[str, Any]]] = []
        for key in self.keys(collection):
            raw = self.raw(collection, key)
            if raw is None or (after is not None and key <= after):
                continue
            if index is not None and raw.index != index:
                continue
            out.append((key, raw.value))
        return out[: max(limit, 0)]


class ScanIgnoresIndex(_Docs):
    """``scan(index=X)`` ignores the index filter and lists the whole collection."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        return super().scan(collection, after=after, limit=limit)


class IndexFilterAfterLimit(_Docs):
    """The index filter is applied in the client after a limited read (filter after limit)."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        rows = super().scan(collection, after=after, limit=limit)
        if index is None:
            return rows
        return [(k, v) for k, v in rows if (r := self.raw(collection, k)) and r.index == index]


class _RemembersOldIndexes(_Docs):
    """A document store that remembers the index entries a rewrite with another ``index``
    left behind (``m_ghosts``), for the stale-index mutants to misuse."""

    def __init__(self, clock: Callable[[], float] = time.time, **kw: Any) -> None:
        super().__init__(clock, **kw)
        self.m_ghosts: dict[tuple[str, str], set[str]] = {}

    def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
              expected_version: str | None, expires_at: float | None,
              index: str | None = None) -> bool:
        with self._lock:
            old = self.raw(collection, key)
            won = super().write(collection, key, value, expected_version=expected_version,
                                expires_at=expires_at, index=index)
            if won and old is not None and old.index is not None and old.index != index:
                self.m_ghosts.setdefault((collection, key), set()).add(old.index)
            return won


class StaleIndexEntries(_RemembersOldIndexes):
    """A rewrite with another ``index`` leaves the old index entry behind."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        rows = dict(super().scan(collection, index=index, after=after, limit=limit))
        if index is not None:
            for (coll, key), indexes in list(self.m_ghosts.items()):
                found = self.read(coll, key).value
                live = coll == collection and index in indexes and found is not None
                if live and (after is None or key > after):
                    rows[key] = found
        return sorted(rows.items())[: max(limit, 0)]


class ScanHangs(_Docs):
    """A scan that never returns (a pager of the adapter's own looping on a stuck cursor)."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        while True:
            time.sleep(0.05)


class ExpiryFilterAfterLimit(_Docs):
    """The expiry filter is applied after a limited read: expired documents use up the page,
    which comes back short, and a pager stops before the live documents behind them."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        out: list[tuple[str, Mapping[str, Any]]] = []
        with self._lock:
            physical = [k for k in self.keys(collection) if after is None or k > after]
            read = 0
            now = self.now()
            for key in physical:
                raw = self.raw(collection, key)
                if raw is None or (index is not None and raw.index != index):
                    continue
                if read >= max(limit, 0):
                    break
                read += 1
                if raw.expires_at is None or raw.expires_at > now:
                    out.append((key, raw.value))
        return out


class StaleIndexSkipsNext(_RemembersOldIndexes):
    """An index kept beside the documents whose scan drops a stale entry (its document was
    rewritten with another index) and, by an off-by-one, the entry after it too."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        if index is None:
            return super().scan(collection, after=after, limit=limit)
        with self._lock:
            live = dict(super().scan(collection, index=index, after=after, limit=1 << 30))
            ghosts = {k for (c, k), idx in self.m_ghosts.items()
                      if c == collection and index in idx and k not in live
                      and (after is None or k > after)}
            entries = sorted([*live, *ghosts])
            out: list[tuple[str, Mapping[str, Any]]] = []
            at = 0
            while at < len(entries) and len(out) < max(limit, 0):
                key = entries[at]
                if key not in live:  # a stale entry: drop it...
                    at += 2  # ...and, off by one, the entry after it
                    continue
                out.append((key, live[key]))
                at += 1
            return out


class ScanAfterPlusOffset(_Docs):
    """The pager reads ``key >= after`` and skips one row (an offset) instead of ``key >
    after``: when ``after`` is no stored key (deleted, or ``key + "\\x00"``) it skips a row."""

    def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
             limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
        rows = super().scan(collection, index=index, limit=1 << 30)
        if after is None:
            return rows[: max(limit, 0)]
        return [(k, v) for k, v in rows if k >= after][1: 1 + max(limit, 0)]


#: The one "database" every ``mutant://ignores_prefix`` storage shares.
_SHARED = MemoryDocumentStore()


# -- sub-stores --------------------------------------------------------------------------------


class LockReleaseIgnoresOwner(DocumentLockStore):
    """Lock release ignores the owner token: anyone releases anyone's lock."""

    def release(self, key: str, owner: str) -> bool:
        info = self.info(key)
        return super().release(key, owner if info is None else info.owner)


class LockAcquireIgnoresExpiry(DocumentLockStore):
    """A lapsed lock is still treated as held: acquire never takes it over."""

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        def step(state: lock_model.LockState | None, now: float) -> tuple[Any, int]:
            if state is not None and state.owner not in (None, owner):
                return state, 0
            return lock_model.acquire(state, now, owner, ttl)

        return self._states.apply(key, step)


class LockExtendRevivesExpired(DocumentLockStore):
    """Extend revives a lapsed lock of the same owner instead of returning False."""

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        def step(state: lock_model.LockState | None, now: float) -> tuple[Any, bool]:
            if state is not None and state.owner == owner:
                revived = lock_model.LockState(owner, max(state.count, 1), deadline(now, ttl),
                                               state.token)
                return revived, True
            return lock_model.extend(state, now, owner, ttl)

        return self._states.apply(key, step)


class LockExtendAddsTtl(DocumentLockStore):
    """Extend adds ``ttl`` to the remaining TTL instead of setting it."""

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        def step(state: lock_model.LockState | None, now: float) -> tuple[Any, bool]:
            new, ok = lock_model.extend(state, now, owner, ttl)
            if ok and new is not None and state is not None and ttl is not None \
                    and state.expires_at is not None:
                new = replace(new, expires_at=state.expires_at + ttl)
            return new, ok

        return self._states.apply(key, step)


class LockTokenRestarts(DocumentLockStore):
    """Fencing tokens come from a per-record counter that restarts at 1 on every fresh hold."""

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        def step(state: lock_model.LockState | None, now: float) -> tuple[Any, int]:
            new, token = lock_model.acquire(state, now, owner, ttl)
            if token and new is not None and new.count == 1:
                new = replace(new, token=1)
                token = 1
            return new, token

        return self._states.apply(key, step)


class SemaphoreLimitOffByOne(DocumentSemaphoreStore):
    """A semaphore admits ``limit + 1`` holders (``>`` instead of ``>=``)."""

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        def step(state: Any, now: float) -> tuple[Any, bool]:
            current = semaphore_model.live(state, now)
            bumped = None if current is None else replace(current, limit=current.limit + 1)
            new, ok = semaphore_model.acquire(bumped, now, holder, limit + 1, lease)
            if ok and new is not None:
                new = replace(new, limit=new.limit - 1)
            return new, ok

        return self._states.apply(key, step)


class SemaphoreReleaseAnyLease(DocumentSemaphoreStore):
    """Release by a stranger frees some other holder's lease."""

    def release(self, key: str, holder: str) -> bool:
        state = self.state(key)
        if state is not None and holder not in state.holders and state.holders:
            holder = sorted(state.holders)[0]
        return super().release(key, holder)


class RateLimitOffByOne(DocumentRateLimitStore):
    """A rate limit admits ``limit + 1`` hits per bucket (``<=`` instead of ``<``)."""

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        return super().hit(key, [replace(w, limit=w.limit + 1) for w in windows])


class PeriodMarkLastWins(DocumentPeriodStore):
    """Mark-if-absent overwrites a live marker and reports success (last wins)."""

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        def step(state: Any, now: float) -> tuple[Any, bool]:
            return period_model.mark(None, now, ttl, context_id)

        return self._states.apply(key, step)


class StepResultsLoseCounters(DocumentStepResultStore):
    """A put drops ``contention_attempts`` and ``data`` (fields not in the table schema)."""

    def put(self, record: StepResultRecord) -> None:
        super().put(replace(record, contention_attempts=0, data=None))


class StepResultsIgnoreStatus(DocumentStepResultStore):
    """``scan(status=...)`` ignores the status filter (the sweeper sees completed records)."""

    def scan(self, *, status: str | None = None, limit: int = 1000,
             cursor: str | None = None) -> ScanPage[StepResultRecord]:
        return super().scan(limit=limit, cursor=cursor)


class StepResultsNoRestamp(DocumentStepResultStore):
    """A put keeps the record's old expiry instead of re-stamping retention."""

    def put(self, record: StepResultRecord) -> None:
        docs = self._records.documents
        key = f"{record.context_id}:{record.step_name}"
        before = docs.read("step_results", key)
        super().put(record)
        if before.value is not None and isinstance(docs, MemoryDocumentStore):
            docs.set_expiry("step_results", key, before.expires_at)


class RollbackOutcomeLastWins(DocumentMapRollbackStore):
    """A rollback outcome is overwritten by a later one (last wins instead of first wins)."""

    def put_outcome(self, map_id: str, position: int, outcome: RollbackOutcome) -> bool:
        if position < 0:
            raise ValueError(f"rollback positions are >= 0, got {position!r}")
        from reactor.generic.maps import position_key

        self._outcomes.put(position_key(map_id, position),
                           {"position": position, **record_to_dict(outcome)}, index=map_id)
        if outcome.index is not None:
            self._seen.create(position_key(map_id, outcome.index), {"index": outcome.index})
        return True


class MapOffsetReturnsOld(DocumentMapStore):
    """``advance_offset`` returns the offset before the addition (two workers get one batch)."""

    def advance_offset(self, map_id: str, amount: int) -> int:
        return super().advance_offset(map_id, amount) - amount


class MapFirstFailureLastWins(DocumentMapStore):
    """The first failed element is overwritten by later failures (last wins)."""

    def set_failed_context(self, map_id: str, context_id: str) -> bool:
        self._state.put(f"{map_id}:failed", {"context_id": context_id})
        return True


class ClaimReleaseByStranger(DocumentClaimStore):
    """An idempotency key is released by any context, not only its holder."""

    def release_idempotency_key(self, reactor: str, key: str, context_id: str) -> bool:
        from reactor.generic.claims import idempotency_document_key

        return self._idempotency.delete(idempotency_document_key(reactor, key))


class IdempotencyKeysJoined(DocumentClaimStore):
    """Idempotency claims keyed by ``<reactor>:<key>`` split back at its first colon: the real
    store's layout for reactor names without a colon, but (``r:``, ``k``) and (``r``, ``:k``)
    are one claim."""

    @staticmethod
    def _split(reactor: str, key: str) -> tuple[str, str]:
        first, rest = f"{reactor}:{key}".split(":", 1)
        return first, rest

    def claim_idempotency_key(self, reactor: str, key: str, context_id: str) -> str | None:
        return super().claim_idempotency_key(*self._split(reactor, key), context_id)

    def release_idempotency_key(self, reactor: str, key: str, context_id: str) -> bool:
        return super().release_idempotency_key(*self._split(reactor, key), context_id)

    def reclaim_idempotency_key(
        self, reactor: str, key: str, from_context_id: str, to_context_id: str
    ) -> bool:
        return super().reclaim_idempotency_key(*self._split(reactor, key), from_context_id,
                                               to_context_id)


class LockKeysNormalised(DocumentLockStore):
    """Lock keys normalised (NFKC, case-folded) before use: ``"Kelvin"`` with the Kelvin sign
    and ``"kelvin"`` are one lock."""

    @staticmethod
    def _fold(key: str) -> str:
        return unicodedata.normalize("NFKC", key).casefold()

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        return super().acquire(self._fold(key), owner, ttl)

    def release(self, key: str, owner: str) -> bool:
        return super().release(self._fold(key), owner)

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        return super().extend(self._fold(key), owner, ttl)

    def held(self, key: str) -> bool:
        return super().held(self._fold(key))

    def info(self, key: str) -> LockInfo | None:
        return super().info(self._fold(key))


class PageCursorDropsTies(DocumentContextStore):
    """A dashboard page's cursor keeps the last row's creation time but not its run id: the
    next page starts after every run created in that same microsecond (ties are skipped)."""

    def page(self, **kwargs: Any) -> RunPage:
        from reactor.ports.serialization import decode_page_cursor, encode_page_cursor

        found = super().page(**kwargs)
        if found.next_cursor is None:
            return found
        key = decode_page_cursor(found.next_cursor)
        # "~" sorts after every character of a run id: past the whole tie group
        return RunPage(runs=found.runs,
                       next_cursor=encode_page_cursor(key.split(":", 1)[0] + ":~"))


class ContextScanDropsLastPage(DocumentContextStore):
    """The run scan drops its last (partial) page after a cursor: the tail is never swept."""

    def scan(self, *, statuses: Any = None, limit: int = 1000,
             include_dispatched_children: bool = False,
             cursor: str | None = None) -> ScanPage[RunSummary]:
        page = super().scan(statuses=statuses, limit=limit,
                            include_dispatched_children=include_dispatched_children,
                            cursor=cursor)
        if cursor is not None and page.next_cursor is None:
            return ScanPage((), None)
        return page


class ContextSaveNoRestamp(DocumentContextStore):
    """A context save keeps the old expiry (retention is stamped on create only)."""

    def save(self, record: ContextRecord, *, fence: Any = None) -> None:
        docs = self._contexts.documents
        before = docs.read("contexts", record.context_id)
        super().save(record, fence=fence)
        if before.value is not None and isinstance(docs, MemoryDocumentStore):
            docs.set_expiry("contexts", record.context_id, before.expires_at)


class LockHeldIgnoresExpiry(DocumentLockStore):
    """``held`` ignores the lock's expiry: a dead worker's lapsed lock still reads as held."""

    def held(self, key: str) -> bool:
        state = self._states.read(key, lambda state, now: state)
        return state is not None and getattr(state, "owner", None) is not None


class PeriodMarkReadThenWrite(DocumentPeriodStore):
    """Mark-if-absent as a read, then an unconditional write: two racers both win."""

    def mark(self, key: str, *, ttl: float | None, context_id: str | None = None) -> bool:
        if self.marker(key) is not None:
            return False
        time.sleep(0.02)  # the round trip between the two calls

        def step(state: Any, now: float) -> tuple[Any, bool]:
            return period_model.mark(None, now, ttl, context_id)

        return self._states.apply(key, step)


class StepScanProjection(DocumentStepResultStore):
    """The status scan returns a projection: rows lack parked_until, waiting, counters, data."""

    def scan(self, *, status: str | None = None, limit: int = 1000,
             cursor: str | None = None) -> ScanPage[StepResultRecord]:
        page = super().scan(status=status, limit=limit, cursor=cursor)
        rows = tuple(replace(r, parked_until=None, waiting=None, contention_attempts=0, data={})
                     for r in page)
        return ScanPage(rows, page.next_cursor)


class RollbackOutcomesTextOrder(DocumentMapRollbackStore):
    """Rollback outcomes listed in the text order of their positions ("10" before "9")."""

    def outcomes(self, map_id: str, *, page_size: int = 500) -> Any:
        listed = list(super().outcomes(map_id, page_size=page_size))
        return iter(sorted(listed, key=lambda item: str(item[0])))


# -- atomicity: read-then-write stores (docs/contract-suite.md) --------------------------------

#: Seconds between a read-then-write store's read and its write: the round trip a real adapter
#: that reads, then writes, spends there (and gives up the GIL for). Without it a pure-Python
#: racer in one process lost only about one race in ten, so under load (the suite's 20-race
#: floor) a mutant survived about one run in eight.
ROUND_TRIP = 0.001


class _ReadThenWriteStates(StateCollection[Any]):
    """A coordination collection whose operations read, then write blindly: no
    compare-and-set, so two racers that both read "free" both win."""

    def apply(self, key: str, transition: Callable[[Any, float], tuple[Any, Any]]) -> Any:
        current = self.documents.read(self.collection, key)
        time.sleep(ROUND_TRIP)
        state = None if current.value is None else self.codec.decode(current.value)
        new_state, result = transition(state, self.documents.now())
        if new_state == state:
            return result
        value = None if new_state is None else self.codec.encode(new_state)
        expires_at = None if new_state is None else self.codec.expiry(new_state)
        for _ in range(64):  # the write itself is unconditional: whatever is stored now
            latest = self.documents.read(self.collection, key).version
            if self.documents.write(self.collection, key, value, expected_version=latest,
                                    expires_at=expires_at):
                break
        return result


class _ReadThenWriteDurable(DurableCollection):
    """A durable collection whose create and update read, then write blindly (no CAS)."""

    __slots__ = ()

    def _blind(self, key: str, value: Mapping[str, Any], index: str | None) -> None:
        for _ in range(64):
            latest = self.documents.read(self.collection, key).version
            if self.documents.write(self.collection, key, value, expected_version=latest,
                                    expires_at=self.expiry(), index=index):
                return

    def create(self, key: str, value: Mapping[str, Any], *, index: str | None = None) -> bool:
        if self.documents.read(self.collection, key).value is not None:
            return False
        time.sleep(ROUND_TRIP)
        self._blind(key, value, index)
        return True

    def update(self, key: str, mutate: Callable[[Mapping[str, Any] | None], Any]) -> Any:
        new_value, index, result = mutate(self.documents.read(self.collection, key).value)
        time.sleep(ROUND_TRIP)
        if new_value is not None:
            self._blind(key, new_value, index)
        return result


def _read_then_write(store: Any) -> Any:
    """``store`` with its state collection swapped for the read-then-write one."""
    states = store._states
    store._states = _ReadThenWriteStates(states.documents, states.collection, states.codec)
    return store


class LockAcquireReadThenWrite(DocumentLockStore):
    """Lock acquire reads the lock, then writes it blindly (not atomic: two owners win)."""

    def __init__(self, documents: Any) -> None:
        super().__init__(documents)
        _read_then_write(self)


class SemaphoreAcquireReadThenWrite(DocumentSemaphoreStore):
    """Semaphore acquire reads the holders, then writes them blindly (a racer's lease is lost)."""

    def __init__(self, documents: Any) -> None:
        super().__init__(documents)
        _read_then_write(self)


class PeriodMarkNotAtomic(DocumentPeriodStore):
    """Mark-if-absent reads the marker, then writes it blindly (two racers both win)."""

    def __init__(self, documents: Any) -> None:
        super().__init__(documents)
        _read_then_write(self)


class ClaimsReadThenWrite(DocumentClaimStore):
    """Idempotency and interrupt claims read the key, then write it blindly (two claimers win)."""

    def __init__(self, documents: Any, *, context_ttl: float | None = 86400.0) -> None:
        super().__init__(documents, context_ttl=context_ttl)
        for name in ("_correlations", "_idempotency", "_resumes", "_attempts"):
            durable = getattr(self, name)
            setattr(self, name, _ReadThenWriteDurable(durable.documents, durable.collection,
                                                      durable.ttl))


class OrderedLockAssignReadThenWrite(DocumentOrderedLockStore):
    """Ordered-lock assign reads the next nonce, then writes it blindly (two waiters, one
    nonce)."""

    def __init__(self, documents: Any, *, context_ttl: float | None = None) -> None:
        super().__init__(documents)
        _read_then_write(self)


class RollbackPositionClaimsNotAtomic(DocumentMapRollbackStore):
    """Rollback position claims read the offset, then write it blindly (two jobs, one
    position)."""

    def claim_positions(self, map_id: str, count: int) -> range:
        from reactor.generic.map_rollbacks import _head

        doc = self._heads.get(map_id)
        time.sleep(ROUND_TRIP)
        stop = int((doc or {}).get("offset", 0)) + count
        meta = None if doc is None else doc.get("meta")
        total = 0 if meta is None else int(meta["total"])
        head, index = _head(doc, offset=stop)
        self._heads.put(map_id, head, index=index)
        return range(stop - count, min(stop, total))


class RollbackStartReadThenWrite(DocumentMapRollbackStore):
    """Rollback start reads the record, then writes its metadata blindly (two starters both
    win, each with its own metadata)."""

    def start(self, metadata: MapRollbackMetadata) -> tuple[bool, MapRollbackMetadata]:
        from reactor.generic.map_rollbacks import _head

        doc = self._heads.get(metadata.map_id)
        if doc is not None and doc.get("meta") is not None:
            return False, record_from_dict(MapRollbackMetadata, doc["meta"])
        time.sleep(ROUND_TRIP)
        head, index = _head(doc, meta=record_to_dict(metadata))
        self._heads.put(metadata.map_id, head, index=index)
        return True, metadata


class LockTtlFloored(DocumentLockStore):
    """Lock TTLs floored to whole seconds on their way to the store (1.9 s becomes 1 s): a
    lease ends before its holder was told."""

    @staticmethod
    def _floor(ttl: float | None) -> float | None:
        if ttl is None or not math.isfinite(ttl) or ttl <= 0:
            return ttl  # invalid TTLs still reach the store's own check
        return float(max(math.floor(ttl), 1))

    def acquire(self, key: str, owner: str, ttl: float | None) -> int:
        return super().acquire(key, owner, self._floor(ttl))

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        return super().extend(key, owner, self._floor(ttl))


class SemaphoreLateReleaseFreesSlot(DocumentSemaphoreStore):
    """A late release by a holder whose lease lapsed still gives a slot back (a slot counter
    decremented whatever the lease): the next acquire takes another holder's slot."""

    def __init__(self, documents: Any) -> None:
        super().__init__(documents)
        self._slots = DurableCollection(documents, "m_semaphore_slots", None)

    def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
        freed = int((self._slots.get(f"freed:{key}") or {}).get("n", 0))

        def step(state: Any, now: float) -> tuple[Any, bool]:
            current = semaphore_model.live(state, now)
            bumped = None if current is None else replace(current, limit=current.limit + freed)
            new, ok = semaphore_model.acquire(bumped, now, holder, limit + freed, lease)
            if new is not None:
                new = replace(new, limit=new.limit - freed)
            return new, ok

        won = bool(self._states.apply(key, step))
        if won:
            self._slots.put(f"held:{key}:{holder}", {"held": True})
        return won

    def release(self, key: str, holder: str) -> bool:
        released = super().release(key, holder)
        if self._slots.delete(f"held:{key}:{holder}") and not released:
            freed = int((self._slots.get(f"freed:{key}") or {}).get("n", 0))
            self._slots.put(f"freed:{key}", {"n": freed + 1})
        return released


class LockExtendRaisesWhenTakenOver(DocumentLockStore):
    """Extend raises StorageError when another owner holds the lock (a failed conditional
    update read as an error): the holder retries and learns of the take-over only at its
    deadline, not at its next extend."""

    def extend(self, key: str, owner: str, ttl: float | None) -> bool:
        extended = super().extend(key, owner, ttl)
        info = None if extended else self.info(key)
        if info is not None and info.owner != owner:
            from reactor.errors import StorageError

            raise StorageError(f"conditional update of lock {key!r} failed")
        return extended


class ContextsTakeLocksWithoutTtl(DocumentContextStore):
    """Native lock-with-record fast paths (LocksWithContexts) whose ``save_taking`` and
    ``load_taking`` take the lock without the claim's TTL: it never lapses."""

    def __init__(self, documents: Any, *, context_ttl: float | None = 86400.0) -> None:
        super().__init__(documents, context_ttl=context_ttl)
        self._locks = DocumentLockStore(documents)

    def _take(self, claim: Any) -> int:
        return self._locks.acquire(claim.key, claim.owner, None)  # the bug: ttl dropped

    def save_taking(self, record: ContextRecord, claim: Any) -> int:
        from reactor.model.records import Fence

        token = self._take(claim)
        if token:
            self.save(record, fence=Fence(claim.key, claim.owner, token))
        return token

    def load_taking(self, context_id: str, claim: Any) -> tuple[int, ContextRecord | None]:
        token = self._take(claim)
        return (token, self.load(context_id)) if token else (0, None)

    def append_releasing(self, delta: Any, fence: Any, *, announce: str | None = None) -> bool:
        appended = self.append(delta, fence=fence)
        if appended:
            self._locks.release(fence.key, fence.owner)
        return appended

    def save_releasing(self, record: ContextRecord, fence: Any, *,
                       announce: str | None = None) -> None:
        self.save(record, fence=fence)
        self._locks.release(fence.key, fence.owner)


class IdempotencyReclaimByHolderClaims(DocumentClaimStore):
    """An idempotency key claimed again by its own holder answers None ("claimed", as a
    correlation id does) instead of the holder's id."""

    def claim_idempotency_key(self, reactor: str, key: str, context_id: str) -> str | None:
        holder = super().claim_idempotency_key(reactor, key, context_id)
        return None if holder == context_id else holder


class SettleReleasingRestampsLock(DocumentMapStore):
    """A native settle_releasing (SettlesAndReleases) whose retention re-stamp covers the
    element's lock record too: a released lock's record outlives its fence retention, and
    another owner's lock without a TTL now lapses with the map."""

    def __init__(self, documents: Any, *, context_ttl: float | None = 86400.0) -> None:
        super().__init__(documents, context_ttl=context_ttl)
        self._lock_store = DocumentLockStore(documents)
        self._lock_ttl = context_ttl

    def settle_releasing(self, map_id: str, index: int, value: str, *,
                         failed_context: str | None = None, fence: Any) -> int:
        from reactor.generic.locks import LOCKS

        if failed_context is not None:
            self.set_failed_context(map_id, failed_context)
        self.put_result(map_id, index, value)
        remaining = self.add_to_counter(map_id, -1)
        self._lock_store.release(fence.key, fence.owner)
        docs = self._lock_store._states.documents
        if self._lock_ttl is not None and docs.read(LOCKS, fence.key).version is not None:
            docs.set_expiry(LOCKS, fence.key, docs.now() + self._lock_ttl)  # type: ignore[attr-defined]
        return remaining


class OrderedLockNonceFromLiveTimers(DocumentOrderedLockStore):
    """Ordered-lock assign derives the nonce from what is live (cursor + live timers + 1)
    instead of a counter: after an out-of-order completion drops a timer, the next waiter
    gets a nonce already handed out."""

    def __init__(self, documents: Any, *, context_ttl: float | None = None) -> None:
        super().__init__(documents)

    def assign(self, key: str, *, ttl: float) -> Any:
        from reactor.model.coordination import ordered_locks as ol_model
        from reactor.model.coordination.ordered_locks import Timed

        def step(state: Any, now: float) -> Any:
            view = ol_model.live(state, now)
            if view is not None and view.next_nonce is not None:
                timers = view.timers.value if view.timers is not None else {}
                counted = (view.cursor.value if view.cursor is not None else 0) + len(timers)
                state = replace(view, next_nonce=Timed(counted, view.next_nonce.expires_at))
            return ol_model.assign(state, now, ttl)

        return self._states.apply(key, step)


# -- schedule stores (docs/protocol.md, "Schedules") ------------------------------------------


class _Schedules(DocumentScheduleStore):
    """A schedule store built like the other mutant stores (``context_ttl`` is ignored)."""

    def __init__(self, documents: Any, *, context_ttl: float | None = None) -> None:
        super().__init__(documents)
        self.m_ttl = context_ttl


class ScheduleCasIgnoresVersion(_Schedules):
    """A schedule put over a stored record ignores ``expected_version`` (last writer wins:
    two schedulers both settle one tick)."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        current = self._documents.read(SCHEDULES, name)
        if (current.value is None) != (expected_version is None):
            return None  # creates stay insert-if-absent: only updates skip the compare
        version = uuid.uuid4().hex
        written = self._documents.write(SCHEDULES, name, {"document": document,
                                                          "version": version},
                                        expected_version=current.version, expires_at=None)
        return version if written else None


class ScheduleInsertIsUpsert(_Schedules):
    """A schedule put with ``expected_version=None`` overwrites a stored record (an upsert,
    not an insert-if-absent)."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        if expected_version is None:
            stored = self.get(name)
            expected_version = stored.version if stored is not None else None
        return super().put(name, document, expected_version=expected_version)


class ScheduleDeleteIsNoop(_Schedules):
    """A schedule delete answers True for the stored version but deletes nothing."""

    def delete(self, name: str, *, expected_version: str) -> bool:
        stored = self.get(name)
        return stored is not None and stored.version == expected_version


class ScheduleDeleteIgnoresVersion(_Schedules):
    """A schedule delete ignores ``expected_version`` (``DELETE ... WHERE name = ?``)."""

    def delete(self, name: str, *, expected_version: str) -> bool:
        stored = self.get(name)
        return stored is not None and super().delete(name, expected_version=stored.version)


class ScheduleScanDropsLastPage(_Schedules):
    """The schedule listing drops its last (partial) page after ``after``: the schedules at
    the end of the name order are never run."""

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[Any]:
        page = super().scan(after=after, limit=limit)
        return [] if after is not None and len(page) < limit else page


class ScheduleScanAfterInclusive(_Schedules):
    """The schedule listing uses ``>=`` for ``after`` (the last name of a page comes again)."""

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[Any]:
        stored = self.get(after) if after is not None else None
        page = super().scan(after=after, limit=limit)
        return [stored, *page][:limit] if stored is not None else page


class ScheduleScanIgnoresLimit(_Schedules):
    """The schedule listing ignores ``limit`` (every record after ``after`` at once)."""

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[Any]:
        return super().scan(after=after, limit=max(limit, 10_000))


class ScheduleDeletedUseUpPage(_Schedules):
    """A delete leaves the name in the listing's index: deleted names use up the scan's limit
    and are dropped after it, so a page comes back short (the schedulers stop there)."""

    def __init__(self, documents: Any, *, context_ttl: float | None = None) -> None:
        super().__init__(documents, context_ttl=context_ttl)
        self.m_ghosts: set[str] = set()

    def delete(self, name: str, *, expected_version: str) -> bool:
        won = super().delete(name, expected_version=expected_version)
        if won:
            self.m_ghosts.add(name)
        return won

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[Any]:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        live = {r.name: r for r in super().scan(after=after, limit=10_000)}
        names = sorted({*live, *(g for g in self.m_ghosts if after is None or g > after)})
        return [live[n] for n in names[:limit] if n in live]


class ScheduleVersionCounter(_Schedules):
    """Schedule versions count the writes of a name and restart at 1 after a delete (ABA: a
    scheduler holding an old version wins again)."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        current = self._documents.read(SCHEDULES, name)
        stored = current.value.get("version") if current.value is not None else None
        if stored != expected_version:
            return None
        version = str(int(stored or 0) + 1)
        written = self._documents.write(SCHEDULES, name, {"document": document,
                                                          "version": version},
                                        expected_version=current.version, expires_at=None)
        return version if written else None


class ScheduleVersionIsContentHash(_Schedules):
    """A schedule's version is a hash of its document: writing a document back gives an old
    version again (ABA)."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        import hashlib

        current = self._documents.read(SCHEDULES, name)
        stored = current.value.get("version") if current.value is not None else None
        if stored != expected_version:
            return None
        version = hashlib.sha256(document.encode()).hexdigest()[:16]
        written = self._documents.write(SCHEDULES, name, {"document": document,
                                                          "version": version},
                                        expected_version=current.version, expires_at=None)
        return version if written else None


class SchedulePutReadThenWrite(_Schedules):
    """A schedule put compares the version it read, then writes blindly (not atomic: two
    schedulers racing from one version both win)."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        stored = self.get(name)
        if (stored.version if stored is not None else None) != expected_version:
            return None
        time.sleep(ROUND_TRIP)
        version = uuid.uuid4().hex
        for _ in range(64):
            latest = self._documents.read(SCHEDULES, name).version
            if self._documents.write(SCHEDULES, name, {"document": document,
                                                       "version": version},
                                     expected_version=latest, expires_at=None):
                return version
        return None


class _RenamedSchedules(_Schedules):
    """A schedule store whose names pass through ``m_key`` on the way in (and come back as
    stored)."""

    def m_key(self, name: str) -> str:
        return name

    def get(self, name: str) -> Any:
        return super().get(self.m_key(name))

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        return super().put(self.m_key(name), document, expected_version=expected_version)

    def delete(self, name: str, *, expected_version: str) -> bool:
        return super().delete(self.m_key(name), expected_version=expected_version)


class ScheduleNamesTruncated(_RenamedSchedules):
    """Schedule names are cut to 64 characters (a short key column): long names collide."""

    def m_key(self, name: str) -> str:
        return name[:64]


class ScheduleNamesNormalised(_RenamedSchedules):
    """Schedule names are NFKC-normalised and case-folded: look-alike names are one record."""

    def m_key(self, name: str) -> str:
        return unicodedata.normalize("NFKC", name).casefold()


class ScheduleRecordsExpire(_Schedules):
    """Schedules are written with the retention of run state (``context_ttl``): a schedule
    nobody writes for a day is gone."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        version = super().put(name, document, expected_version=expected_version)
        if version is not None and isinstance(self._documents, MemoryDocumentStore):
            self._documents.set_expiry(SCHEDULES, name,
                                       self._documents.now() + (self.m_ttl or COLLECTION_TTL))
        return version


class ScheduleDocumentReencoded(_Schedules):
    """Schedule documents are parsed and dumped again (a JSON column): keys sorted, spaces
    and escapes lost."""

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        import json

        try:
            document = json.dumps(json.loads(document), sort_keys=True, ensure_ascii=False)
        except ValueError:
            pass
        return super().put(name, document, expected_version=expected_version)


class _SharedCollection:
    """A document store view that keeps collection ``schedules`` in ``sweep_cursors``."""

    def __init__(self, documents: Any) -> None:
        self.m_inner = documents

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self.m_inner, attribute)
        if attribute not in ("read", "write", "scan", "raw", "set_expiry"):
            return found

        def call(collection: str, *args: Any, **kwargs: Any) -> Any:
            if collection == SCHEDULES:
                collection = "sweep_cursors"
            return found(collection, *args, **kwargs)

        return call


class ScheduleSharesCollection(_Schedules):
    """Schedules are kept in the sweep cursors' collection: a schedule named like a sweeper
    and that sweeper's cursor are one record."""

    def __init__(self, documents: Any, *, context_ttl: float | None = None) -> None:
        super().__init__(_SharedCollection(documents), context_ttl=context_ttl)


# -- routers -----------------------------------------------------------------------------------


class RetryResetsDeliveryCount(LocalRouter):
    """``retry`` re-enqueues a fresh message, losing the delivery count."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.m_retried: set[str] = set()

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        self.m_retried.add(delivery.job.id)
        super().retry(delivery, delay_seconds)

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        got = super().receive(max_jobs, wait_seconds)
        return [replace(d, delivery_count=1) if d.job.id in self.m_retried else d for d in got]


class DeadLetterLosesReason(LocalRouter):
    """``dead_letter`` stores the body but drops the reason."""

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        super().dead_letter(delivery, "")


class StaleReceiptAcksCurrent(LocalRouter):
    """An ack with a stale receipt acks the current delivery (receipts keyed by job id only)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.m_latest: dict[str, Delivery] = {}

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        got = super().receive(max_jobs, wait_seconds)
        for delivery in got:
            self.m_latest[delivery.job.id] = delivery
        return got

    def ack(self, delivery: Delivery) -> None:
        super().ack(self.m_latest.get(delivery.job.id, delivery))


class DelayFloored(LocalRouter):
    """``enqueue`` floors delays to whole seconds (1.6 s becomes 1 s): a job runs early."""

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        floored = math.floor(delay_seconds) if math.isfinite(delay_seconds) else delay_seconds
        return super().enqueue(job, floored)


class DelayIgnored(LocalRouter):
    """``enqueue`` ignores ``delay_seconds``: delayed jobs are visible at once."""

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        return super().enqueue(job, 0)


class DeadLettersNewestFirst(LocalRouter):
    """Dead letters are listed newest first instead of oldest first."""

    def dead_letters(self, limit: int = 100, cursor: str | None = None) -> Any:
        return list(reversed(super().dead_letters(limit, cursor)))


class RouterIgnoresPrefix(LocalRouter):
    """The router ignores ``?prefix=``: every router of the URL shares one queue."""

    _shared: LocalRouter | None = None

    def __new__(cls, **kw: Any) -> Any:
        if cls._shared is None:
            cls._shared = LocalRouter(**kw)
        return cls._shared


# -- backend mutants: the Redis Lua scripts, the SQLite example, MongoDB and DynamoDB ----------
#
# Each runs against the real backend: the test Redis and moto started by scripts/test (their
# URLs come from the environment, tests/services.py), mongomock in process, and a SQLite file
# in the temporary directory.


@dataclass(frozen=True)
class LuaPatch:
    """One edit of one Lua script of ``reactor_redis``: ``old`` (exactly once) becomes ``new``."""

    script: str
    old: str
    new: str
    bug: str


def _patched_scripts(client: Any, patch: LuaPatch) -> Any:
    """A ``RedisScripts`` registry whose ``patch.script`` is the edited text (loaded at once,
    so no fallback can load the original under the same object)."""
    from reactor_redis._base import RedisScript, RedisScripts, _source

    class PatchedScripts(RedisScripts):
        def get(self, name: str) -> RedisScript:
            script = self._loaded.get(name)
            if script is None:
                source = _source(name)
                if name == patch.script:
                    if source.count(patch.old) != 1:
                        raise ValueError(f"the patch of {name}.lua no longer applies: "
                                         f"{patch.old!r} is not found exactly once")
                    source = source.replace(patch.old, patch.new)
                script = RedisScript(self._client, source)
                script.sha = self._client.script_load(source)
                self._loaded[name] = script
            return script

    return PatchedScripts(client)


def _redis_storage(patch: LuaPatch, prefix: str, ttl: float) -> Any:
    """The Redis storage whose sub-stores run the patched script (a ``RedisStorage``)."""
    import inspect

    from reactor_redis import RedisStorage, client_from_url

    client = client_from_url(_service_url("REACTOR_TEST_REDIS_URL"))
    storage = RedisStorage(client, prefix=prefix, context_ttl=ttl)
    scripts = _patched_scripts(client, patch)
    for attribute in ("contexts", "step_results", "maps", "map_rollbacks", "claims", "locks",
                      "semaphores", "rate_limits", "periods", "ordered_locks", "schedules"):
        cls = type(getattr(storage, attribute))
        extra = ({"context_ttl": ttl} if "context_ttl" in inspect.signature(cls).parameters
                 else {})
        setattr(storage, attribute, cls(client, scripts, storage.keys, **extra))
    return storage


def _redis_router(patch: LuaPatch, prefix: str, visibility: float) -> Any:
    """The Redis router running the patched ``router.lua``."""
    from reactor_redis import router_from_url

    url = _service_url("REACTOR_TEST_REDIS_URL")
    router = router_from_url(f"{url}?prefix={prefix}&visibility_timeout={visibility}")
    router.primitive._scripts = _patched_scripts(router.client, patch)
    return router


def _service_url(variable: str) -> str:
    url = os.environ.get(variable, "").strip()
    if not url:
        raise RuntimeError(f"this mutant needs ${variable}: run it through scripts/test")
    return url


LUA_PATCHES: dict[str, LuaPatch] = {
    "redis_lock_release_skips_owner": LuaPatch(
        "lock", "if not live or s[1] ~= owner then return 0 end",
        "if not live then return 0 end",
        "lock.lua: release and extend skip the owner check (anyone frees anyone's lock)"),
    "redis_lock_ttl_in_milliseconds": LuaPatch(
        "lock", "    local x = -1\n    if ttl >= 0 then x = now + ttl end\n    if live then",
        "    local x = -1\n    if ttl >= 0 then x = now + ttl / 1000 end\n    if live then",
        "lock.lua: acquire reads the microsecond TTL as milliseconds (locks lapse 1000x early)"),
    "redis_semaphore_keeps_expired_holders": LuaPatch(
        "semaphore", "redis.call('ZREMRANGEBYSCORE', holders, '-inf', us(now))\n", "",
        "semaphore.lua: acquire never prunes expired holders (a dead holder keeps its slot)"),
    "redis_semaphore_off_by_one": LuaPatch(
        "semaphore", "if not mine and n >= limit then", "if not mine and n > limit then",
        "semaphore.lua: `n > limit` instead of `n >= limit` (limit + 1 holders)"),
    "redis_map_counter_twice": LuaPatch(
        "map", "  result = redis.call('INCRBY', KEYS[2], ARGV[3])",
        "  redis.call('INCRBY', KEYS[2], ARGV[3])\n"
        "  result = redis.call('INCRBY', KEYS[2], ARGV[3])",
        "map.lua: the map counter is incremented twice per call"),
    "redis_rollback_outcome_overwrites": LuaPatch(
        "map", "redis.call('HSETNX', KEYS[10], ARGV[3], ARGV[4])",
        "redis.call('HSET', KEYS[10], ARGV[3], ARGV[4])",
        "map.lua: HSET instead of HSETNX (a later rollback outcome overwrites the first)"),
    "redis_rollback_failed_counted_before_check": LuaPatch(
        "map",
        "  if redis.call('HSETNX', KEYS[10], ARGV[3], ARGV[4]) == 0 then return 0 end\n"
        "  if ARGV[5] ~= '' then redis.call('SADD', KEYS[11], ARGV[5]) end\n"
        "  if ARGV[6] == '1' then redis.call('INCR', KEYS[14]) end",
        "  if ARGV[6] == '1' then redis.call('INCR', KEYS[14]) end\n"
        "  if redis.call('HSETNX', KEYS[10], ARGV[3], ARGV[4]) == 0 then return 0 end\n"
        "  if ARGV[5] ~= '' then redis.call('SADD', KEYS[11], ARGV[5]) end",
        "map.lua: the failed counter is incremented before the first-wins check (losers count)"),
    "redis_claim_release_without_compare": LuaPatch(
        "claim", "  if cur ~= ARGV[3] then return 0 end\n  return redis.call('DEL', key)",
        "  return redis.call('DEL', key)",
        "claim.lua: release deletes the key without comparing the holder"),
    "redis_save_taking_unfenced": LuaPatch(
        "context_save", "  fence = us(granted)\n", "",
        "context_save.lua: a save that takes the lock is not fenced with the token it took"),
    "redis_settle_releases_any_owner": LuaPatch(
        "map", "if KEYS[15] then lock_call(KEYS[15], 'release', ARGV[6], ARGV[7]) end",
        "if KEYS[15] then redis.call('DEL', KEYS[15]) end",
        "map.lua: settle releases the element lock whoever holds it"),
    "redis_router_ack_skips_receipt_check": LuaPatch(
        "router",
        "  if not current(ARGV[2], ARGV[3], ARGV[4] or '') then return 0 end\n  return ack(",
        "  return ack(",
        "router.lua: ack skips the receipt check (a stale receipt acks the current delivery)"),
    "redis_take_load_without_ttl": LuaPatch(
        "context_take", "lock_call(KEYS[1], 'acquire', ARGV[1], ARGV[2], ARGV[3])",
        "lock_call(KEYS[1], 'acquire', ARGV[1], '-1', ARGV[3])",
        "context_take.lua: load_taking takes the lock without the claim's TTL (never lapses)"),
    "redis_take_save_without_ttl": LuaPatch(
        "context_save", "lock_call(KEYS[4], 'acquire', lock_owner, lock_ttl, lock_keep)",
        "lock_call(KEYS[4], 'acquire', lock_owner, '-1', lock_keep)",
        "context_save.lua: save_taking takes the lock without the claim's TTL (never lapses)"),
    "redis_settle_restamps_lock": LuaPatch(
        "map", "  return restamp_all((ms + math.min(math.floor(ms / 8), 900)) * 1000, 14)",
        "  return restamp_all((ms + math.min(math.floor(ms / 8), 900)) * 1000)",
        "map.lua: the re-stamp of an aged map covers every key, the element's lock KEYS[15] "
        "included"),
    "redis_schedule_put_skips_compare": LuaPatch(
        "schedule", "if current ~= expected then return 0 end",
        "if op == 'delete' and current ~= expected then return 0 end",
        "schedule.lua: put skips the version compare (a stale scheduler overwrites)"),
    "redis_schedule_delete_keeps_name": LuaPatch(
        "schedule", "  redis.call('ZREM', names, name)\n", "",
        "schedule.lua: delete leaves the name in the sorted set (deleted names use up a page)"),
    "redis_router_retry_resets_count": LuaPatch(
        "router", "put(body, tonumber(ARGV[4]), count)",
        "put(body, tonumber(ARGV[4]), 0)",
        "router.lua: retry re-adds the body without its delivery count"),
}


def _sqlite_store() -> type[Any]:
    from reactor_sqlite import SQLiteDocumentStore

    return SQLiteDocumentStore


@functools.cache
def _sqlite_mutants() -> dict[str, type[Any]]:
    """The SQLite example's document store with one broken method each (built lazily)."""
    import json
    import sqlite3

    from reactor.errors import StorageError

    base = _sqlite_store()

    class SqliteUpdateWithoutVersion(base):  # type: ignore[misc, valid-type]
        """SQLite: ``UPDATE ... WHERE collection = ? AND key = ?`` without ``AND version = ?``."""

        def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
                  expected_version: str | None, expires_at: float | None,
                  index: str | None = None) -> bool:
            if expected_version is None or value is None:
                return bool(super().write(collection, key, value,
                                          expected_version=expected_version,
                                          expires_at=expires_at, index=index))
            changed = self._execute(
                "UPDATE documents SET value = ?, version = ?, expires_at = ?, idx = ? "
                "WHERE collection = ? AND key = ?",
                (json.dumps(dict(value)), uuid.uuid4().hex, expires_at, index,
                 self._prefix + collection, key),
            )
            return bool(changed == 1)

    class SqliteScanAfterInclusive(base):  # type: ignore[misc, valid-type]
        """SQLite: the keyset scan says ``key >= ?`` instead of ``key > ?``."""

        def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
            return list(super()._query(sql.replace("AND key > ?", "AND key >= ?"), params))

    class SqliteCounterVersions(base):  # type: ignore[misc, valid-type]
        """SQLite: versions are a per-key counter that restarts at 1 after a delete (ABA)."""

        def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
                  expected_version: str | None, expires_at: float | None,
                  index: str | None = None) -> bool:
            with self._lock:
                won = super().write(collection, key, value, expected_version=expected_version,
                                    expires_at=expires_at, index=index)
                if won and value is not None:
                    self._execute(
                        "UPDATE documents SET version = ? WHERE collection = ? AND key = ?",
                        (str(int(expected_version or 0) + 1), self._prefix + collection, key),
                    )
                return bool(won)

    class SqliteDriverErrorsEscape(base):  # type: ignore[misc, valid-type]
        """SQLite: reads call the driver unwrapped (``sqlite3.Error`` escapes, no StorageError)."""

        def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                return list(self._conn.execute(sql, params).fetchall())

    class SqliteReadErrorsAsAbsent(base):  # type: ignore[misc, valid-type]
        """SQLite: a read answers "absent" on any ``sqlite3.OperationalError`` (a permission too).

        Meant for "no such table" before the schema exists; a revoked permission (or a locked
        database) reads as "no row", so a claim answers "claimed" and a load ``None``.
        """

        def read(self, collection: str, key: str) -> Versioned:
            with self._lock:
                if self._closed:
                    raise StorageError("the SQLite document store is closed")
                try:
                    rows = self._conn.execute(
                        "SELECT value, version, expires_at FROM documents "
                        "WHERE collection = ? AND key = ?",
                        (self._prefix + collection, key),
                    ).fetchall()
                except sqlite3.OperationalError:  # "no such table": nothing stored yet
                    return Versioned(value=None, version=None)
                except sqlite3.Error as exc:
                    raise StorageError(f"SQLite query failed: {exc}") from exc
            if not rows:
                return Versioned(value=None, version=None)
            text, version, expires_at = rows[0]
            if expires_at is not None and expires_at <= self.now():
                return Versioned(value=None, version=version)
            return Versioned(value=json.loads(text), version=version, expires_at=expires_at)

    return {
        "sqlite_update_without_version": SqliteUpdateWithoutVersion,
        "sqlite_scan_after_inclusive": SqliteScanAfterInclusive,
        "sqlite_counter_versions": SqliteCounterVersions,
        "sqlite_driver_errors_escape": SqliteDriverErrorsEscape,
        "sqlite_read_errors_as_absent": SqliteReadErrorsAsAbsent,
    }


def _sqlite_storage(name: str, prefix: str, ttl: float,
                    clock: Callable[[], float] = time.time, path: str | None = None) -> Any:
    """A ``SQLiteStorage`` whose store is the mutant, on ``path`` (default: a file of this
    process in the temporary directory)."""
    import tempfile

    from reactor_sqlite import SQLiteStorage

    path = path or str(Path(tempfile.gettempdir()) / f"reactor-mutants-{os.getpid()}.db")
    storage = SQLiteStorage(path, prefix=prefix, context_ttl=ttl, clock=clock)
    if name != "control_sqlite":
        storage.documents.__class__ = _sqlite_mutants()[name]
    return storage


@functools.cache
def _mongo_mutants() -> dict[str, type[Any]]:
    from pymongo import ASCENDING
    from pymongo.errors import PyMongoError
    from reactor_mongodb.documents import MongoDocumentStore

    from reactor.errors import StorageError

    class MongoInsertAsUpsert(MongoDocumentStore):
        """MongoDB: a create is ``replace_one(upsert=True)``, not ``insert_one`` (no condition)."""

        def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
                  expected_version: str | None, expires_at: float | None,
                  index: str | None = None) -> bool:
            if expected_version is not None or value is None:
                return bool(super().write(collection, key, value,
                                          expected_version=expected_version,
                                          expires_at=expires_at, index=index))
            body = {"value": json.dumps(dict(value)), "version": uuid.uuid4().hex,
                    "exp": expires_at, "expires_at": None, "idx": index}
            self._collection(collection).replace_one({"_id": key}, body, upsert=True)
            return True

    class MongoScanIgnoresIndex(MongoDocumentStore):
        """MongoDB: the scan query never adds ``idx`` (the index filter is dropped)."""

        def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
                 limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
            if limit <= 0:
                return []
            query: dict[str, Any] = {}
            if after is not None:
                query["_id"] = {"$gt": after}
            query["$or"] = [{"exp": None}, {"exp": {"$gt": self.now()}}]
            try:
                cursor = self._collection(collection).find(query, projection={"value": 1})
                rows = cursor.sort("_id", ASCENDING).limit(int(limit))
                return [(str(doc["_id"]), json.loads(doc["value"])) for doc in rows]
            except PyMongoError as exc:
                raise StorageError(f"MongoDB scan of {collection} failed: {exc}") from exc

    import json

    return {"mongo_insert_as_upsert": MongoInsertAsUpsert,
            "mongo_scan_ignores_index": MongoScanIgnoresIndex}


def _mongo_storage(name: str, prefix: str, ttl: float) -> Any:
    from reactor_mongodb.testing import storage_from_url as mongomock_storage

    storage = mongomock_storage(f"mongomock://mutants/reactor?prefix={prefix}", context_ttl=ttl)
    if name != "control_mongomock":
        storage.documents.__class__ = _mongo_mutants()[name]
    return storage


@functools.cache
def _mongo_router_mutants() -> dict[str, type[Any]]:
    """The MongoDB router (on mongomock) with one broken method each (built lazily)."""
    from pymongo.errors import PyMongoError
    from reactor_mongodb.router import MongoQueue, MongoRouter

    from reactor.errors import RouterError

    class MongoDeadLetterInsertsAgain(MongoQueue):
        """MongoDB: ``dead_letter`` inserts a new letter (``insert_one``): a retried one writes two.

        The letter gets a fresh ``_id`` instead of an upsert keyed by the delivery (message id
        and lease), so a retry after the insert went through (its reply lost, or the delete
        from the queue after it failed) lists the job twice among the dead letters.
        """

        def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
            query = self._leased(message_id, receipt)
            if query is None:
                return False
            try:
                doc = self.jobs.find_one(query)
                if doc is None:
                    return False
                self.dead.insert_one({
                    "_id": f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}",
                    "queue": self.queue,
                    "message_id": doc["_id"],
                    "body": doc["body"],
                    "reason": reason,
                    "at": at,
                })
                self.jobs.delete_one(query)
            except PyMongoError as exc:
                raise RouterError(f"MongoDB dead-lettering failed: {exc}") from exc
            return True

    class MongoCloseAcksHeldJobs(MongoRouter):
        """MongoDB: ``close()`` acks (deletes) the deliveries it holds: they are never redelivered.

        A shutdown taken for the end of the jobs it received and nobody acknowledged: another
        consumer never gets them, instead of after the visibility timeout.
        """

        def _held(self) -> dict[str, Delivery]:
            return self.__dict__.setdefault("m_held", {})  # type: ignore[no-any-return]

        def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
            got = super().receive(max_jobs, wait_seconds)
            self._held().update((d.receipt, d) for d in got)
            return got

        def ack(self, delivery: Delivery) -> None:
            super().ack(delivery)
            self._held().pop(delivery.receipt, None)

        def retry(self, delivery: Delivery, delay_seconds: float) -> None:
            super().retry(delivery, delay_seconds)
            self._held().pop(delivery.receipt, None)

        def dead_letter(self, delivery: Delivery, reason: str) -> None:
            super().dead_letter(delivery, reason)
            self._held().pop(delivery.receipt, None)

        def close(self) -> None:
            if not self.closed:
                for delivery in list(self._held().values()):
                    self.ack(delivery)  # "the worker is gone: its jobs are finished"
            super().close()

    return {"mongo_dead_letter_inserts_again": MongoDeadLetterInsertsAgain,
            "mongo_close_acks_held_jobs": MongoCloseAcksHeldJobs}


#: Backend router mutants (and the control) on the MongoDB router over mongomock.
MONGO_ROUTERS = ("mongo_dead_letter_inserts_again", "mongo_close_acks_held_jobs",
                 "control_mongomock")


def _mongo_router(name: str, prefix: str, visibility: float) -> Any:
    """The MongoDB router on the in-process mongomock server, in the namespace ``prefix``."""
    from reactor_mongodb.router import MongoQueue
    from reactor_mongodb.testing import router_from_url as mongomock_router

    router = mongomock_router(f"mongomock://mutants/reactor?prefix={prefix}_"
                              f"&visibility_timeout={visibility}")
    if name != "control_mongomock":
        mutant = _mongo_router_mutants()[name]
        if issubclass(mutant, MongoQueue):
            router.primitive.__class__ = mutant
        else:
            router.__class__ = mutant
    return router


@functools.cache
def _dynamo_mutants() -> dict[str, type[Any]]:
    from reactor_dynamodb.documents import DynamoDocumentStore

    class DynamoPutWithoutCondition(DynamoDocumentStore):
        """DynamoDB: an update's ``PutItem`` is sent without its ``ConditionExpression``."""

        def write(self, collection: str, key: str, value: Mapping[str, Any] | None, *,
                  expected_version: str | None, expires_at: float | None,
                  index: str | None = None) -> bool:
            if expected_version is not None and value is not None:
                current = self.raw(collection, key)
                if current is not None:
                    expected_version = current.version  # the condition can no longer fail
            return bool(super().write(collection, key, value, expected_version=expected_version,
                                      expires_at=expires_at, index=index))

    class DynamoScanIgnoresIndex(DynamoDocumentStore):
        """DynamoDB: ``scan(index=X)`` queries the base table, not the GSI (no index filter)."""

        def scan(self, collection: str, *, index: str | None = None, after: str | None = None,
                 limit: int = 1000) -> list[tuple[str, Mapping[str, Any]]]:
            return list(super().scan(collection, after=after, limit=limit))

    return {"dynamo_put_without_condition": DynamoPutWithoutCondition,
            "dynamo_scan_ignores_index": DynamoScanIgnoresIndex}


def _dynamo_storage(name: str, prefix: str, ttl: float) -> Any:
    from reactor_dynamodb import storage_from_url as dynamo_storage

    endpoint = _service_url("REACTOR_TEST_MOTO_URL")
    storage = dynamo_storage(
        f"dynamodb://reactor-mutants?region=us-east-1&clock_skew_budget=0.25"
        f"&endpoint_url={endpoint}&prefix={prefix}", context_ttl=ttl,
    )
    if name != "control_dynamodb":
        storage.documents.__class__ = _dynamo_mutants()[name]
    return storage


#: Backend storage mutants by name: ``(backend, bug)``; built by :func:`_backend_storage`.
BACKEND_STORAGES: dict[str, str] = {
    **{name: "redis" for name, patch in LUA_PATCHES.items() if patch.script != "router"},
    "sqlite_update_without_version": "sqlite",
    "sqlite_scan_after_inclusive": "sqlite",
    "sqlite_counter_versions": "sqlite",
    "sqlite_driver_errors_escape": "sqlite",
    "sqlite_read_errors_as_absent": "sqlite",
    "mongo_insert_as_upsert": "mongomock",
    "mongo_scan_ignores_index": "mongomock",
    "dynamo_put_without_condition": "dynamodb",
    "dynamo_scan_ignores_index": "dynamodb",
    # the unbroken builders: the runner's control runs, one per backend
    "control_redis": "redis",
    "control_sqlite": "sqlite",
    "control_mongomock": "mongomock",
    "control_dynamodb": "dynamodb",
}
LUA_PATCHES["control_redis"] = LuaPatch(
    "lock", "return lock_call(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])",
    "return lock_call(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])", "no bug (control)")


def _backend_storage(name: str, prefix: str, ttl: float) -> Any:
    backend = BACKEND_STORAGES[name]
    if backend == "redis":
        return _redis_storage(LUA_PATCHES[name], prefix, ttl)
    if backend == "sqlite":
        return _sqlite_storage(name, prefix, ttl)
    if backend == "mongomock":
        return _mongo_storage(name, prefix, ttl)
    return _dynamo_storage(name, prefix, ttl)


# -- the table ---------------------------------------------------------------------------------

_DOCS: dict[str, type[_Docs]] = {
    "counter_versions": CounterVersions,
    "scan_after_inclusive": ScanAfterInclusive,
    "scan_unordered": ScanUnordered,
    "millisecond_clock": MillisecondClock,
    "cas_ignores_expected_version": CasIgnoresExpectedVersion,
    "insert_is_upsert": InsertIsUpsert,
    "unconditional_delete": UnconditionalDelete,
    "expired_still_readable": ExpiredStillReadable,
    "expiry_boundary_exclusive": ExpiryBoundaryExclusive,
    "expired_hides_version": ExpiredHidesVersion,
    "scan_ignores_expiry": ScanIgnoresExpiry,
    "scan_ignores_index": ScanIgnoresIndex,
    "index_filter_after_limit": IndexFilterAfterLimit,
    "stale_index_entries": StaleIndexEntries,
    "scan_hangs": ScanHangs,  # not in MUTANTS: the runner's proof of the per-test timeout
    "expiry_filter_after_limit": ExpiryFilterAfterLimit,
    "expiry_filter_after_limit_in_sweeps": ExpiryFilterAfterLimit,  # seen by a sweeper scan
    "stale_index_skips_next": StaleIndexSkipsNext,
    "scan_after_plus_offset": ScanAfterPlusOffset,
}

_STORES: dict[str, tuple[str, type[Any]]] = {
    "lock_release_ignores_owner": ("locks", LockReleaseIgnoresOwner),
    "lock_acquire_ignores_expiry": ("locks", LockAcquireIgnoresExpiry),
    "lock_extend_revives_expired": ("locks", LockExtendRevivesExpired),
    "lock_extend_adds_ttl": ("locks", LockExtendAddsTtl),
    "lock_token_restarts": ("locks", LockTokenRestarts),
    "semaphore_limit_off_by_one": ("semaphores", SemaphoreLimitOffByOne),
    "semaphore_release_any_lease": ("semaphores", SemaphoreReleaseAnyLease),
    "rate_limit_off_by_one": ("rate_limits", RateLimitOffByOne),
    "period_mark_last_wins": ("periods", PeriodMarkLastWins),
    "step_results_lose_counters": ("step_results", StepResultsLoseCounters),
    "step_results_ignore_status": ("step_results", StepResultsIgnoreStatus),
    "step_results_no_restamp": ("step_results", StepResultsNoRestamp),
    "rollback_outcome_last_wins": ("map_rollbacks", RollbackOutcomeLastWins),
    "map_offset_returns_old": ("maps", MapOffsetReturnsOld),
    "map_first_failure_last_wins": ("maps", MapFirstFailureLastWins),
    "claim_release_by_stranger": ("claims", ClaimReleaseByStranger),
    "idempotency_keys_joined": ("claims", IdempotencyKeysJoined),
    "page_cursor_drops_ties": ("contexts", PageCursorDropsTies),
    "rollback_start_read_then_write": ("map_rollbacks", RollbackStartReadThenWrite),
    "lock_ttl_floored": ("locks", LockTtlFloored),
    "lock_keys_normalised": ("locks", LockKeysNormalised),
    "context_scan_drops_last_page": ("contexts", ContextScanDropsLastPage),
    "context_save_no_restamp": ("contexts", ContextSaveNoRestamp),
    "lock_held_ignores_expiry": ("locks", LockHeldIgnoresExpiry),
    "period_mark_read_then_write": ("periods", PeriodMarkReadThenWrite),
    "step_scan_projection": ("step_results", StepScanProjection),
    "rollback_outcomes_text_order": ("map_rollbacks", RollbackOutcomesTextOrder),
    "lock_acquire_read_then_write": ("locks", LockAcquireReadThenWrite),
    "semaphore_acquire_read_then_write": ("semaphores", SemaphoreAcquireReadThenWrite),
    "period_mark_not_atomic": ("periods", PeriodMarkNotAtomic),
    "claims_read_then_write": ("claims", ClaimsReadThenWrite),
    "ordered_lock_assign_read_then_write": ("ordered_locks", OrderedLockAssignReadThenWrite),
    "rollback_position_claims_not_atomic": ("map_rollbacks", RollbackPositionClaimsNotAtomic),
    "semaphore_late_release_frees_slot": ("semaphores", SemaphoreLateReleaseFreesSlot),
    "lock_extend_raises_when_taken_over": ("locks", LockExtendRaisesWhenTakenOver),
    "contexts_take_locks_without_ttl": ("contexts", ContextsTakeLocksWithoutTtl),
    "idempotency_reclaim_by_holder_claims": ("claims", IdempotencyReclaimByHolderClaims),
    "settle_releasing_restamps_lock": ("maps", SettleReleasingRestampsLock),
    "ordered_lock_nonce_from_live_timers": ("ordered_locks", OrderedLockNonceFromLiveTimers),
    "schedule_cas_ignores_version": ("schedules", ScheduleCasIgnoresVersion),
    "schedule_insert_is_upsert": ("schedules", ScheduleInsertIsUpsert),
    "schedule_delete_is_noop": ("schedules", ScheduleDeleteIsNoop),
    "schedule_delete_ignores_version": ("schedules", ScheduleDeleteIgnoresVersion),
    "schedule_scan_drops_last_page": ("schedules", ScheduleScanDropsLastPage),
    "schedule_scan_after_inclusive": ("schedules", ScheduleScanAfterInclusive),
    "schedule_scan_ignores_limit": ("schedules", ScheduleScanIgnoresLimit),
    "schedule_deleted_use_up_page": ("schedules", ScheduleDeletedUseUpPage),
    "schedule_version_counter": ("schedules", ScheduleVersionCounter),
    "schedule_version_is_content_hash": ("schedules", ScheduleVersionIsContentHash),
    "schedule_put_read_then_write": ("schedules", SchedulePutReadThenWrite),
    "schedule_names_truncated": ("schedules", ScheduleNamesTruncated),
    "schedule_names_normalised": ("schedules", ScheduleNamesNormalised),
    "schedule_records_expire": ("schedules", ScheduleRecordsExpire),
    "schedule_document_reencoded": ("schedules", ScheduleDocumentReencoded),
    "schedule_shares_collection": ("schedules", ScheduleSharesCollection),
}

_ROUTERS: dict[str, type[LocalRouter]] = {
    "retry_resets_delivery_count": RetryResetsDeliveryCount,
    "dead_letter_loses_reason": DeadLetterLosesReason,
    "stale_receipt_acks_current": StaleReceiptAcksCurrent,
    "delay_ignored": DelayIgnored,
    "delay_floored": DelayFloored,
    "dead_letters_newest_first": DeadLettersNewestFirst,
    "router_ignores_prefix": RouterIgnoresPrefix,
    **declaration_mutants.ROUTERS,
}


def _doc_of(cls: type[Any]) -> str:
    return (cls.__doc__ or "").strip().splitlines()[0]


def _m(name: str, concern: str, modules: str, kind: str, cls: type[Any],
       expect: str | None = None, select: str | None = None) -> Mutant:
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    return Mutant(name, concern, tuple(f"reactor_contract.test_{m}" for m in modules.split()),
                  doc, kind, expect, select)


_SHARED_DOC = "The adapter ignores ``?prefix=``: every storage shares one namespace."

#: Seconds this module's import sleeps, to stand for an adapter whose import is slow (boto3,
#: pymongo on a cold disk): the per-test timeout must not count it.
_IMPORT_DELAY = float(os.environ.get("REACTOR_MUTANTS_IMPORT_DELAY", "0"))
if _IMPORT_DELAY:
    time.sleep(_IMPORT_DELAY)

#: Every mutant the strength runner proves the suite rejects.
MUTANTS: tuple[Mutant, ...] = (
    _m("counter_versions", "documents", "documents locks", "storage", CounterVersions,
       "never counters"),
    _m("scan_after_inclusive", "documents", "documents contexts sweeps", "storage",
       ScanAfterInclusive, "strictly greater"),
    _m("scan_unordered", "documents", "documents contexts", "storage", ScanUnordered,
       "ascending"),
    _m("millisecond_clock", "documents", "documents surface", "storage", MillisecondClock,
       "epoch seconds"),
    _m("cas_ignores_expected_version", "documents", "documents concurrency", "storage",
       CasIgnoresExpectedVersion, "expected_version"),
    _m("insert_is_upsert", "documents", "documents periods claims", "storage", InsertIsUpsert,
       "must be absent"),
    _m("unconditional_delete", "documents", "documents", "storage", UnconditionalDelete,
       "stale version must lose"),
    _m("expired_still_readable", "documents", "documents contexts", "storage",
       ExpiredStillReadable, "TTL job"),
    _m("expiry_boundary_exclusive", "documents", "documents", "storage",
       ExpiryBoundaryExclusive, "expires_at <= now"),
    _m("expired_hides_version", "documents", "documents claims", "storage",
       ExpiredHidesVersion, "still reports its stored version"),
    _m("scan_ignores_expiry", "documents", "documents step_results", "storage",
       ScanIgnoresExpiry, "unexpired documents only"),
    _m("scan_ignores_index", "documents", "documents step_results", "storage",
       ScanIgnoresIndex, "only documents written with index"),
    _m("index_filter_after_limit", "documents", "documents step_results", "storage",
       IndexFilterAfterLimit, "before the limit"),
    _m("stale_index_entries", "documents", "documents step_results", "storage",
       StaleIndexEntries, "leaves the old index"),
    _m("expiry_filter_after_limit", "documents", "documents", "storage",
       ExpiryFilterAfterLimit, "expiry is filtered before the limit"),
    _m("expiry_filter_after_limit_in_sweeps", "step_results", "step_results", "storage",
       ExpiryFilterAfterLimit, "a page is never short because expired records", "expired"),
    _m("stale_index_skips_next", "documents", "documents", "storage", StaleIndexSkipsNext,
       "off by one, the entry after it"),
    _m("scan_after_plus_offset", "documents", "documents contexts", "storage",
       ScanAfterPlusOffset, "skips one row (an offset)"),
    Mutant("ignores_prefix", "documents", ("reactor_contract.test_documents",
                                           "reactor_contract.test_step_results"),
           _SHARED_DOC.replace("``", "`"), "storage"),
    _m("lock_release_ignores_owner", "locks", "locks", "storage", LockReleaseIgnoresOwner),
    _m("lock_acquire_ignores_expiry", "locks", "locks", "storage", LockAcquireIgnoresExpiry),
    _m("lock_extend_revives_expired", "locks", "locks", "storage", LockExtendRevivesExpired),
    _m("lock_extend_adds_ttl", "locks", "locks", "storage", LockExtendAddsTtl),
    _m("lock_token_restarts", "locks", "locks", "storage", LockTokenRestarts),
    _m("semaphore_limit_off_by_one", "semaphores", "semaphores", "storage",
       SemaphoreLimitOffByOne),
    _m("semaphore_release_any_lease", "semaphores", "semaphores", "storage",
       SemaphoreReleaseAnyLease),
    _m("rate_limit_off_by_one", "rate_limits", "rate_limits", "storage", RateLimitOffByOne),
    _m("period_mark_last_wins", "periods", "periods", "storage", PeriodMarkLastWins),
    _m("step_results_lose_counters", "step_results", "step_results", "storage",
       StepResultsLoseCounters),
    _m("step_results_ignore_status", "step_results", "step_results", "storage",
       StepResultsIgnoreStatus),
    _m("step_results_no_restamp", "step_results", "step_results", "storage",
       StepResultsNoRestamp),
    _m("rollback_outcome_last_wins", "map_rollbacks", "map_rollbacks", "storage",
       RollbackOutcomeLastWins),
    _m("map_offset_returns_old", "maps", "maps", "storage", MapOffsetReturnsOld),
    _m("map_first_failure_last_wins", "maps", "maps", "storage", MapFirstFailureLastWins),
    _m("claim_release_by_stranger", "claims", "claims", "storage", ClaimReleaseByStranger),
    # keys from user text that collide (properties over adversarial names, test_keys)
    _m("idempotency_keys_joined", "keys", "claims keys", "storage", IdempotencyKeysJoined,
       "distinct names are distinct records"),
    _m("lock_keys_normalised", "keys", "locks keys", "storage", LockKeysNormalised,
       "distinct names are distinct records"),
    # listings against a model (test_listings), races of every method (test_concurrency and
    # the racing_ tests), time values rounded the unsafe way (test_rounding)
    _m("page_cursor_drops_ties", "listings", "contexts listings", "storage",
       PageCursorDropsTies, "exactly once"),
    _m("rollback_start_read_then_write", "map_rollbacks", "map_rollbacks concurrency",
       "storage", RollbackStartReadThenWrite, None, "racing_starts"),
    _m("lock_ttl_floored", "rounding", "locks leases rounding", "storage", LockTtlFloored,
       "never shorter than asked"),
    _m("delay_floored", "rounding", "routers rounding", "router", DelayFloored,
       "never shorter than asked", "delay"),
    _m("context_scan_drops_last_page", "sweeps", "contexts sweeps", "storage",
       ContextScanDropsLastPage),
    _m("context_save_no_restamp", "contexts", "contexts", "storage", ContextSaveNoRestamp),
    _m("retry_resets_delivery_count", "routers", "routers", "router",
       RetryResetsDeliveryCount, select="retry"),
    _m("dead_letter_loses_reason", "routers", "routers", "router", DeadLetterLosesReason,
       select="dead_letter"),
    _m("stale_receipt_acks_current", "routers", "routers", "router", StaleReceiptAcksCurrent,
       select="stale_receipt"),
    _m("delay_ignored", "routers", "routers", "router", DelayIgnored, select="delay"),
    _m("dead_letters_newest_first", "routers", "routers", "router", DeadLettersNewestFirst,
       select="dead_letter"),
    # blind spots closed later: sweeper liveness, racing period marks, step scan rows
    _m("lock_held_ignores_expiry", "sweeps", "sweeps", "storage", LockHeldIgnoresExpiry,
       "ignores the lock's expiry", "liveness_lock"),
    _m("period_mark_read_then_write", "sweeps", "sweeps", "storage", PeriodMarkReadThenWrite,
       "exactly once", "racing"),
    _m("step_scan_projection", "step_results", "step_results sweeps", "storage",
       StepScanProjection, "scan rows carry every field"),
    _m("rollback_outcomes_text_order", "map_rollbacks", "map_rollbacks", "storage",
       RollbackOutcomesTextOrder, "numeric position order"),
    _m("router_ignores_prefix", "routers", "routers", "router", RouterIgnoresPrefix,
       "another ?prefix=", "prefixes"),
    # declarations that contradict the behaviour (declaration_mutants.py)
    *(
        Mutant(name, concern, tuple(f"reactor_contract.test_{m}" for m in modules.split()),
               bug, kind, expect, select)
        for name, concern, modules, kind, bug, expect, select in declaration_mutants.SPECS
    ),
    # fault classes the suite certified before (atomicity under contention, ...)
    _m("lock_acquire_read_then_write", "concurrency", "concurrency locks", "storage",
       LockAcquireReadThenWrite, "not atomic", "lock"),
    _m("semaphore_acquire_read_then_write", "concurrency", "concurrency semaphores", "storage",
       SemaphoreAcquireReadThenWrite, "not atomic", "admits_exactly_its_limit"),
    _m("claims_read_then_write", "concurrency", "concurrency claims", "storage",
       ClaimsReadThenWrite, "not atomic", "claim or idempotency or interrupt"),
    _m("period_mark_not_atomic", "concurrency", "concurrency periods", "storage",
       PeriodMarkNotAtomic, "not atomic", "period or mark"),
    _m("ordered_lock_assign_read_then_write", "concurrency", "concurrency ordered_locks",
       "storage", OrderedLockAssignReadThenWrite, "two waiters holding one ticket", "ordered"),
    _m("rollback_position_claims_not_atomic", "concurrency", "concurrency map_rollbacks",
       "storage", RollbackPositionClaimsNotAtomic, "two jobs undoing one element", "position"),
    _m("semaphore_late_release_frees_slot", "semaphores", "semaphores", "storage",
       SemaphoreLateReleaseFreesSlot, "releases late with False and frees nothing"),
    _m("lock_extend_raises_when_taken_over", "leases", "leases", "storage",
       LockExtendRaisesWhenTakenOver, "reported at the holder's next extend", "take_over"),
    _m("contexts_take_locks_without_ttl", "contexts", "contexts", "storage",
       ContextsTakeLocksWithoutTtl, "takes the lock with the claim's TTL", "taking"),
    _m("idempotency_reclaim_by_holder_claims", "claims", "claims", "storage",
       IdempotencyReclaimByHolderClaims, "answers its own id"),
    _m("settle_releasing_restamps_lock", "maps", "maps", "storage",
       SettleReleasingRestampsLock, "re-stamps the map's records, never a lock",
       "settle_releasing"),
    _m("ordered_lock_nonce_from_live_timers", "ordered_locks", "ordered_locks", "storage",
       OrderedLockNonceFromLiveTimers, "a counter of the nonces handed out"),
    # the schedule store (test_schedules): one run per tick rests on its compare-and-set
    *(
        _m(name, "schedules", "schedules", "storage", _STORES[name][1], expect)
        for name, expect in (
            ("schedule_cas_ignores_version", "a stale version must lose"),
            ("schedule_insert_is_upsert", "the record must be absent"),
            ("schedule_delete_is_noop", "(the delete removed the record)"),
            ("schedule_delete_ignores_version", "returns False, never raises, and deletes"),
            ("schedule_scan_drops_last_page", "lists the names strictly after it"),
            ("schedule_scan_after_inclusive", "strictly after it"),
            ("schedule_scan_ignores_limit", "returns the first 1 names"),
            ("schedule_deleted_use_up_page", "lists every stored schedule once"),
            ("schedule_version_counter", "returns None, never raises, and writes nothing"),
            ("schedule_version_is_content_hash", "never issued before"),
            ("schedule_put_read_then_write", "exactly one wins"),
            ("schedule_names_truncated", "only by case, Unicode normalisation"),
            ("schedule_names_normalised", "only by case, Unicode normalisation"),
            ("schedule_records_expire", "never expires"),
            ("schedule_document_reencoded", "verbatim"),
            ("schedule_shares_collection", None),
        )
    ),
    # the Redis Lua scripts, the SQLite example, MongoDB (mongomock), DynamoDB (moto)
    *(
        Mutant(name, concern, tuple(f"reactor_contract.test_{m}" for m in modules.split()),
               LUA_PATCHES[name].bug, kind, expect, select, "redis")
        for name, concern, modules, kind, expect, select in (
            ("redis_lock_release_skips_owner", "locks", "locks", "storage", None, None),
            ("redis_lock_ttl_in_milliseconds", "locks", "locks", "storage", None, None),
            ("redis_semaphore_keeps_expired_holders", "semaphores", "semaphores", "storage",
             None, None),
            ("redis_semaphore_off_by_one", "semaphores", "semaphores", "storage", None, None),
            ("redis_map_counter_twice", "maps", "maps", "storage", None, None),
            ("redis_rollback_outcome_overwrites", "map_rollbacks", "map_rollbacks", "storage",
             None, None),
            ("redis_rollback_failed_counted_before_check", "map_rollbacks", "map_rollbacks",
             "storage", "changes no counter", None),
            ("redis_claim_release_without_compare", "claims", "claims", "storage", None, None),
            ("redis_save_taking_unfenced", "contexts", "contexts", "storage", None,
             "save_taking"),
            ("redis_settle_releases_any_owner", "maps", "maps", "storage", None,
             "settle_releasing"),
            ("redis_settle_restamps_lock", "maps", "maps", "storage",
             "re-stamps the map's records, never a lock", "settle_releasing"),
            ("redis_take_load_without_ttl", "contexts", "contexts", "storage",
             "takes the lock with the claim's TTL", "taking"),
            ("redis_take_save_without_ttl", "contexts", "contexts", "storage",
             "takes the lock with the claim's TTL", "taking"),
            ("redis_router_ack_skips_receipt_check", "routers", "routers", "router", None,
             "stale_receipt"),
            ("redis_router_retry_resets_count", "routers", "routers", "router", None, "retry"),
            ("redis_schedule_put_skips_compare", "schedules", "schedules", "storage",
             "must be absent", None),
            ("redis_schedule_delete_keeps_name", "schedules", "schedules", "storage",
             "lists every stored schedule once", None),
        )
    ),
    *(
        Mutant(name, concern, tuple(f"reactor_contract.test_{m}" for m in modules.split()),
               _doc_of(factory()[name]), "storage", expect, select, backend)
        for name, concern, modules, backend, factory, expect, select in (
            ("sqlite_update_without_version", "documents", "documents", "sqlite",
             _sqlite_mutants, "stale version must lose", None),
            ("sqlite_scan_after_inclusive", "documents", "documents", "sqlite",
             _sqlite_mutants, "strictly greater", None),
            ("sqlite_counter_versions", "documents", "documents", "sqlite", _sqlite_mutants,
             "never counters", None),
            ("sqlite_driver_errors_escape", "surface", "surface", "sqlite", _sqlite_mutants,
             "surfaces as reactor.StorageError", None),
            ("mongo_insert_as_upsert", "documents", "documents", "mongomock", _mongo_mutants,
             "must be absent", None),
            ("mongo_scan_ignores_index", "documents", "documents", "mongomock", _mongo_mutants,
             "only documents written with index", None),
            ("dynamo_put_without_condition", "documents", "documents", "dynamodb",
             _dynamo_mutants, "stale version must lose", None),
            ("dynamo_scan_ignores_index", "documents", "documents", "dynamodb",
             _dynamo_mutants, "only documents written with index", None),
        )
    ),
    # faults injected at the driver (test_driver_faults), each certified by every other module
    *(
        Mutant(name, "driver_faults", ("reactor_contract.test_driver_faults",),
               _doc_of(factory()[name]), kind, expect, select, backend)
        for name, kind, backend, factory, expect, select in (
            ("sqlite_read_errors_as_absent", "storage", "sqlite", _sqlite_mutants,
             "must surface as StorageError, but the operation answered",
             "surfaces_as_storage_error"),
            ("mongo_dead_letter_inserts_again", "router", "mongomock", _mongo_router_mutants,
             "dead letters of job", "loses_no_job and dead_letter"),
            ("mongo_close_acks_held_jobs", "router", "mongomock", _mongo_router_mutants,
             "lost its unacknowledged jobs", "closing_a_consumer"),
        )
    ),
)

#: The unbroken backend builders the runner checks first: ``{backend: (storage, router)}``.
CONTROLS: dict[str, tuple[str, str | None]] = {
    "redis": ("mutant://control_redis", "mutant://control_redis"),
    "sqlite": ("mutant://control_sqlite", None),
    "mongomock": ("mutant://control_mongomock", "mutant://control_mongomock"),
    "dynamodb": ("mutant://control_dynamodb", None),
}


# -- factories ---------------------------------------------------------------------------------


def _name(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    if parts.scheme != "mutant":
        raise ValueError(f"not a mutant:// URL: {url!r}")
    return parts.netloc or "none", dict(parse_qsl(parts.query))


def _build(name: str, documents: MemoryDocumentStore | None, ttl: float) -> MemoryStorage:
    if name in _DOCS:
        documents = documents or _DOCS[name]()
    elif name == "ignores_prefix":
        documents = documents or _SHARED
    storage = MemoryStorage(context_ttl=ttl, documents=documents)
    if name in _STORES:
        attribute, cls = _STORES[name]
        if attribute in ("locks", "semaphores", "rate_limits", "periods"):
            setattr(storage, attribute, cls(storage.documents))
        else:
            setattr(storage, attribute, cls(storage.documents, context_ttl=ttl))
    elif name in declaration_mutants.STORAGES:
        declaration_mutants.build(name, storage, ttl)
    elif name == "declares_no_locks":
        storage.m_skip = "capability: locks not supported"  # type: ignore[attr-defined]
    elif name == "claims_not_applicable":  # forges the suite's own n/a mark
        storage.m_skip = "not applicable: this adapter has no claims"  # type: ignore[attr-defined]
    elif name not in _DOCS and name not in ("none", "ignores_prefix") and name not in _ROUTERS:
        raise ValueError(f"unknown mutant {name!r}")
    return storage


def storage_from_url(url: str, **settings: Any) -> Any:
    """``mutant://<name>?prefix=...``: the memory storage with one bug (``prefix`` ignored), or
    a backend's storage with one bug in its namespace ``prefix``."""
    name, query = _name(url)
    ttl = float(settings.get("context_ttl", COLLECTION_TTL))
    if name in BACKEND_STORAGES:
        return _backend_storage(name, query.get("prefix") or f"m{uuid.uuid4().hex[:8]}", ttl)
    if name in declaration_mutants.BACKED:
        return declaration_mutants.BACKED[name](query.get("prefix") or "m", ttl)
    return _build(name, None, ttl)


def router_from_url(url: str, **settings: Any) -> Any:
    """``mutant://<name>?visibility_timeout=S``: the local router with one bug (or none), the
    Redis router running a patched ``router.lua``, or the MongoDB router (on mongomock) with
    one broken method."""
    name, query = _name(url)
    visibility = float(query.get("visibility_timeout", settings.get("visibility_timeout", 1)))
    if name in LUA_PATCHES:
        prefix = query.get("prefix") or f"m{uuid.uuid4().hex[:8]}"
        patch = LUA_PATCHES[name] if LUA_PATCHES[name].script == "router" else LuaPatch(
            "router", "elseif op == 'ack' then", "elseif op == 'ack' then", "no bug (control)")
        return _redis_router(patch, prefix, visibility)
    if name in MONGO_ROUTERS:
        return _mongo_router(name, query.get("prefix") or f"m{uuid.uuid4().hex[:8]}", visibility)
    cls = _ROUTERS.get(name, LocalRouter)
    return cls(visibility_timeout=visibility, workers=0)


def probe_for(storage: Storage) -> Any:
    """The memory probe, whose clocked views are the same mutant (or the backend's probe)."""
    from reactor_contract.generic_probe import GenericProbe

    if not isinstance(storage, MemoryStorage):
        return _backend_probe(storage)
    skip = getattr(storage, "m_skip", None)
    if skip is not None:  # an adapter that declares a mandatory concern absent
        import pytest

        pytest.skip(skip)
    documents, ttl = storage.documents, storage.context_ttl
    name = next((n for n, c in _DOCS.items() if type(documents) is c), None)
    for attribute_name, (attribute, cls) in _STORES.items():
        if isinstance(getattr(storage, attribute), cls):
            name = attribute_name

    def clocked(clock: Callable[[], float]) -> Storage:
        return _build(name or "none", documents.with_clock(clock), ttl)

    return GenericProbe(documents, clocked=clocked)


def _backend_probe(storage: Any) -> Any:
    """The backend's own probe; the SQLite one's clocked views keep the mutation."""
    from reactor_contract.generic_probe import GenericProbe
    from reactor_dynamodb.storage import DynamoStorage
    from reactor_mongodb.storage import MongoStorage
    from reactor_redis import RedisStorage
    from reactor_sqlite import SQLiteStorage
    from reactor_sqlite.probe import SQLiteCleanup

    if isinstance(storage, RedisStorage):
        from reactor_redis.probe import probe_for as redis_probe

        return redis_probe(storage)
    if isinstance(storage, MongoStorage):
        from reactor_mongodb.probe import probe_for as mongo_probe

        return mongo_probe(storage)
    if isinstance(storage, DynamoStorage):
        from reactor_dynamodb.probe import probe_for as dynamo_probe

        return dynamo_probe(storage)
    assert isinstance(storage, SQLiteStorage)
    documents, ttl = storage.documents, storage.context_ttl
    name = next((n for n, c in _sqlite_mutants().items() if type(documents) is c),
                "control_sqlite")

    def clocked(clock: Callable[[], float]) -> Storage:
        # the same file as the storage under test (a declaration mutant keeps its own)
        return _sqlite_storage(  # type: ignore[no-any-return]
            name, documents.prefix, ttl, clock, path=documents.path)

    # the example's probe class: it names the connection the driver faults are injected into
    return GenericProbe(documents, drivers=[(documents, "_conn")], clocked=clocked,
                       cleanup=SQLiteCleanup(documents))


def router_probe_for(router: Any) -> Any:
    """The local router's probe (raw injection), or the MongoDB or the Redis router's."""
    from reactor_contract.probes import memory_router_probe
    from reactor_mongodb.router import MongoRouter

    if isinstance(router, MongoRouter):
        from reactor_mongodb.probe import router_probe_for as mongo_router_probe

        return mongo_router_probe(router)
    if not isinstance(router, LocalRouter):
        from reactor_redis.probe import router_probe_for as redis_router_probe

        return redis_router_probe(router)
    return memory_router_probe(router)


def write_entry_points(directory: Path) -> Path:
    """Declare the ``mutant`` scheme in a throw-away distribution under ``directory``.

    Returns:
        ``directory``, to put on ``PYTHONPATH`` next to this module's directory.
    """
    info = directory / "reactor_contract_mutants-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reactor-contract-mutants\nVersion: 0.0\n"
    )
    groups = {
        "reactor.storages": "storage_from_url",
        "reactor.routers": "router_from_url",
        "reactor.probes": "probe_for",
        "reactor.router_probes": "router_probe_for",
    }
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\nmutant = reactor_mutants:{fn}\n\n" for group, fn in groups.items())
    )
    return directory
