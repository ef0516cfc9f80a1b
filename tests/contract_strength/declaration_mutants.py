"""Mutant adapters whose declarations contradict their behaviour (docs/contract-suite.md,
"Declarations are checked").

Each is the memory storage (or the ``local://`` router) doing what it always does while
declaring something else: a size limit it does not have, a server clock it does not read, a
fast path it does not implement whole or implements wrong. The other contract modules take a
declaration at its word, so each of these passed them; ``reactor_contract.test_declarations``
rejects them. :mod:`reactor_mutants` registers them (:data:`SPECS`, :func:`build`,
:data:`ROUTERS`).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reactor.errors import ContextTooLargeError
from reactor.generic.contexts import CONTEXTS, DocumentContextStore
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.records import ContextDelta, ContextRecord, Fence, LockClaim
from reactor.ports.inspection import QueueStats
from reactor.ports.router import Delivery, Job
from reactor.ports.storage import Capabilities, LockStore

__all__ = ["BACKED", "ROUTERS", "SPECS", "STORAGES", "build"]

#: The limit the size mutants declare (or really have).
LIMIT = 64 * 1024


class LimitRefusesTheLimit(DocumentContextStore):
    """The size check is ``>=`` instead of ``>``: a context of exactly the declared limit is
    refused."""

    def _check_size(self, context_id: str, size: int) -> None:
        limit = self._max_document_bytes
        if limit is not None and size >= limit:
            raise ContextTooLargeError(f"context {context_id} is {size} bytes",
                                       size_bytes=size, limit_bytes=limit)


class AppendRefusesTheLimit(DocumentContextStore):
    """An append's size check is ``>=`` (a save's is right): a run an append brings to exactly
    the declared limit is refused."""

    def append(self, delta: ContextDelta, *, fence: Fence | None = None) -> bool:
        limit = self._max_document_bytes
        head = self._contexts.documents.read(CONTEXTS, delta.context_id).value
        if limit is not None and head is not None:
            size = int(head.get("_bytes", 0)) + len(delta.segment.encode("utf-8"))
            if size >= limit:
                raise ContextTooLargeError(f"context {delta.context_id} would be {size} bytes",
                                           size_bytes=size, limit_bytes=limit)
        return super().append(delta, fence=fence)


class UndeclaredSizeLimit(DocumentContextStore):
    """A real 64 KiB context limit left undeclared (``max_document_bytes=None``)."""

    def __init__(self, documents: Any, *, context_ttl: float | None = 86400.0) -> None:
        super().__init__(documents, context_ttl=context_ttl, max_document_bytes=LIMIT)


class _Locking(DocumentContextStore):
    """A context store that can reach the storage's locks (for the fast-path mutants)."""

    m_locks: LockStore

    def _take(self, claim: LockClaim) -> int:
        return int(self.m_locks.acquire(claim.key, claim.owner, claim.ttl))


class HalfDeclaredFastPath(_Locking):
    """Two of the four ``LocksWithContexts`` members written: the engine never uses them."""

    def save_taking(self, record: ContextRecord, claim: LockClaim) -> int:
        token = self._take(claim)
        if token:
            self.save(record, fence=Fence(claim.key, claim.owner, token))
        return token

    def load_taking(self, context_id: str, claim: LockClaim) -> tuple[int, ContextRecord | None]:
        token = self._take(claim)
        return (token, self.load(context_id)) if token else (0, None)


class SaveManyDropsTheLast(DocumentContextStore):
    """``save_many`` (SavesContextsTogether) never sends the last record of a batch."""

    def save_many(self, records: Sequence[ContextRecord]) -> None:
        for record in list(records)[:-1]:
            self.save(record)


class LoadTakingReadsNoClaims(_Locking):
    """``load_taking_claims`` (ReadsClaimsWhenTaking) takes the lock and loads, but returns no
    claims: a cancel request is never seen at the load."""

    def load_taking_claims(
        self, context_id: str, claim: LockClaim, step_paths: Sequence[str]
    ) -> tuple[int, ContextRecord | None, dict[str, str]]:
        token = self._take(claim)
        return (token, self.load(context_id), {}) if token else (0, None, {})


class AppendReadsNoClaims(DocumentContextStore):
    """``append_reading_claims`` (ReadsClaimsWhenAppending) appends but returns no claims: a
    running run never learns of its cancel from its checkpoints."""

    def append_reading_claims(
        self, delta: ContextDelta, fence: Fence | None, step_paths: Sequence[str]
    ) -> tuple[bool, dict[str, str]]:
        return self.append(delta, fence=fence), {}


class RouterCapsDelays(LocalRouter):
    """``enqueue`` caps delays at 1 s (a transport maximum applied instead of re-deferring)."""

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        capped = min(delay_seconds, 1.0) if math.isfinite(delay_seconds) else delay_seconds
        return super().enqueue(job, capped)


class RouterCapsAtItsNativeLimit(LocalRouter):
    """Declares a native delay limit (``BoundedNativeDelay``, 900 s like SQS) and caps every
    delay, of ``enqueue`` and ``retry``, at it instead of re-deferring the rest: a delay of an
    hour comes after 15 minutes. No test waits 15 minutes, so only the lowered limit shows it."""

    _limit = 900.0

    @property
    def native_delay_limit(self) -> float:
        return self._limit

    def limit_native_delay(self, seconds: float) -> None:
        self._limit = float(seconds)

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        capped = min(delay_seconds, self._limit) if math.isfinite(delay_seconds) else delay_seconds
        return super().enqueue(job, capped)

    def retry(self, delivery: Delivery, delay_seconds: float) -> None:
        capped = min(delay_seconds, self._limit) if math.isfinite(delay_seconds) else delay_seconds
        super().retry(delivery, capped)


class QueueStatsReportEmpty(LocalRouter):
    """``queue_stats`` (QueueInspector) is a placeholder reporting an empty queue."""

    def queue_stats(self) -> QueueStats:
        return QueueStats(ready=0, delayed=0, in_flight=0, dead_letters=0)


class HalfDeadLetterAdmin(LocalRouter):
    """Dead-letter administration without ``purge_dead_letters``: the router is not a
    ``DeadLetterAdmin``, so its dead-letter tests skip as a gap."""

    purge_dead_letters = None  # type: ignore[assignment]


def _constant_sweep_sizes(storage: MemoryStorage, ttl: float) -> None:
    """``sweep_index_sizes`` (SweepIndexInspector) is a placeholder reporting empty indexes."""
    storage.sweep_index_sizes = lambda: {  # type: ignore[attr-defined]
        "runs": 0, "steps": 0, "maps": 0, "map_rollbacks": 0,
    }


def _sqlite_declared_in_process(prefix: str, ttl: float) -> Any:
    """The SQLite example's storage declaring ``keeps_data_in_process``: its records are in a
    file any process can open (so secrets would be kept in clear without a key)."""
    from reactor_sqlite import SQLiteStorage

    class SQLiteDeclaredInProcess(SQLiteStorage):
        """The SQLite storage, declared in-process (copied from the memory storage)."""

        keeps_data_in_process = True

    # one file per strength run: the processes the suite starts inherit the variable
    session = os.environ.setdefault("REACTOR_MUTANTS_IN_PROCESS_SESSION", str(os.getpid()))
    path = Path(tempfile.gettempdir()) / f"reactor-mutants-in-process-{session}.db"
    return SQLiteDeclaredInProcess(str(path), prefix=prefix, context_ttl=ttl)


#: ``{name: factory(prefix, ttl)}``: mutants that are not the memory storage.
BACKED: dict[str, Callable[[str, float], Any]] = {
    "sqlite_declares_in_process": _sqlite_declared_in_process,
}


def _declaring(**fields: Any) -> Callable[[MemoryStorage, float], None]:
    """A mutation that only changes what the memory storage declares."""

    def mutate(storage: MemoryStorage, ttl: float) -> None:
        storage.capabilities = Capabilities(**{
            "signals": True, "max_document_bytes": None, "clock": "application", **fields,
        })

    return mutate


def _contexts(cls: type[DocumentContextStore], **fields: Any) -> Callable[[MemoryStorage, float],
                                                                          None]:
    """A mutation that swaps the context store (and declares ``fields``)."""

    def mutate(storage: MemoryStorage, ttl: float) -> None:
        if fields:
            _declaring(**fields)(storage, ttl)
        limit = storage.capabilities.max_document_bytes
        if cls is UndeclaredSizeLimit:
            contexts: DocumentContextStore = UndeclaredSizeLimit(storage.documents,
                                                                 context_ttl=ttl)
        else:
            contexts = cls(storage.documents, context_ttl=ttl, max_document_bytes=limit)
        if isinstance(contexts, _Locking):
            contexts.m_locks = storage.locks
        storage.contexts = contexts

    return mutate


def _undeclared_signals(storage: MemoryStorage, ttl: float) -> None:
    """Working signals declared absent (``signals=False``): the engine polls instead."""
    storage.capabilities = Capabilities(signals=False, max_document_bytes=None,
                                        clock="application")

#: ``{name: (mutation of a fresh memory storage, bug class)}``.
STORAGES: dict[str, tuple[Callable[[MemoryStorage, float], None], str]] = {
    "limit_refuses_the_limit": (
        _contexts(LimitRefusesTheLimit, max_document_bytes=LIMIT),
        "The size check is >= instead of >: a context of exactly the declared limit is "
        "refused.",
    ),
    "append_refuses_the_limit": (
        _contexts(AppendRefusesTheLimit, max_document_bytes=LIMIT),
        "An append's size check is >= (a save's is right): a run an append brings to exactly "
        "the declared limit is refused.",
    ),
    "undeclared_size_limit": (
        _contexts(UndeclaredSizeLimit),
        "A real 64 KiB context limit left undeclared (max_document_bytes=None).",
    ),
    "declares_server_clock": (
        _declaring(clock="server"),
        "A server clock declared for a store that reads the application's clock.",
    ),
    "undeclared_signals": (
        _undeclared_signals,
        "Working signals declared absent (signals=False): the engine polls instead.",
    ),
    "half_declared_fast_path": (
        _contexts(HalfDeclaredFastPath),
        "Two of the four LocksWithContexts members written: the engine never uses them.",
    ),
    "save_many_drops_the_last": (
        _contexts(SaveManyDropsTheLast),
        "save_many (SavesContextsTogether) never sends the last record of a batch.",
    ),
    "load_taking_reads_no_claims": (
        _contexts(LoadTakingReadsNoClaims),
        "load_taking_claims (ReadsClaimsWhenTaking) returns no claims: a cancel is never "
        "seen at the load.",
    ),
    "sweep_index_sizes_constant": (
        _constant_sweep_sizes,
        "sweep_index_sizes (SweepIndexInspector) is a placeholder reporting empty indexes.",
    ),
    "append_reads_no_claims": (
        _contexts(AppendReadsNoClaims),
        "append_reading_claims (ReadsClaimsWhenAppending) returns no claims: a running run "
        "never learns of its cancel.",
    ),
}

#: ``{name: router class}``.
ROUTERS: dict[str, type[LocalRouter]] = {
    "router_caps_delays": RouterCapsDelays,
    "router_caps_at_its_native_limit": RouterCapsAtItsNativeLimit,
    "queue_stats_report_empty": QueueStatsReportEmpty,
    "half_dead_letter_admin": HalfDeadLetterAdmin,
}

#: ``(name, concern, modules, kind, bug, expect, select)`` of every mutant here; the modules
#: are the ones whose tests took the declaration at its word, plus ``declarations``.
SPECS: tuple[tuple[str, str, str, str, str, str, str | None], ...] = (
    ("limit_refuses_the_limit", "contexts", "contexts declarations", "storage",
     STORAGES["limit_refuses_the_limit"][1], "declares max_document_bytes=65536 stores", None),
    ("append_refuses_the_limit", "contexts", "contexts declarations", "storage",
     STORAGES["append_refuses_the_limit"][1], "an append that brings a run to 65536 bytes",
     None),
    ("undeclared_size_limit", "contexts", "contexts declarations", "storage",
     STORAGES["undeclared_size_limit"][1], "declares no document size limit", None),
    ("declares_server_clock", "surface", "surface rate_limits declarations", "storage",
     STORAGES["declares_server_clock"][1], "declares Capabilities.clock='server'", None),
    ("undeclared_signals", "surface", "surface signals declarations", "storage",
     STORAGES["undeclared_signals"][1], "declare signals=True", None),
    ("half_declared_fast_path", "contexts", "contexts declarations", "storage",
     STORAGES["half_declared_fast_path"][1], "every member of its protocol", None),
    ("save_many_drops_the_last", "contexts", "contexts declarations", "storage",
     STORAGES["save_many_drops_the_last"][1], "saves every record it is given", None),
    ("load_taking_reads_no_claims", "contexts", "contexts declarations", "storage",
     STORAGES["load_taking_reads_no_claims"][1], "load_taking_claims (ReadsClaimsWhenTaking)",
     None),
    ("append_reads_no_claims", "contexts", "contexts declarations", "storage",
     STORAGES["append_reads_no_claims"][1], "append_reading_claims (ReadsClaimsWhenAppending)",
     None),
    ("router_caps_delays", "routers", "routers declarations", "router",
     "enqueue caps delays at 1 s (a transport maximum applied instead of re-deferring).",
     "honours any finite delay", "delay"),
    ("router_caps_at_its_native_limit", "routers", "routers declarations", "router",
     "Declares a native delay limit of 900 s and caps delays at it instead of re-deferring.",
     "honoured whole, by re-deferring", "native_limit"),
    ("sqlite_declares_in_process", "surface", "surface declarations", "storage",
     "The SQLite storage declaring keeps_data_in_process: its records are in a file any "
     "process can open.", "keeps what it is given in this process", None),
    ("sweep_index_sizes_constant", "surface", "surface declarations", "storage",
     STORAGES["sweep_index_sizes_constant"][1], "counts the entries of the sweep indexes",
     None),
    ("queue_stats_report_empty", "routers", "routers declarations", "router",
     "queue_stats (QueueInspector) is a placeholder reporting an empty queue.",
     "counts this router's queue", "queue_stats"),
    ("half_dead_letter_admin", "routers", "routers dead_letters declarations", "router",
     "Dead-letter administration without purge_dead_letters: its tests skip as a gap.",
     "but not purge_dead_letters of DeadLetterAdmin", "dead_letter or half_declared"),
)


def build(name: str, storage: MemoryStorage, ttl: float) -> MemoryStorage:
    """Apply the mutation ``name`` (a key of :data:`STORAGES`) to a fresh memory storage."""
    STORAGES[name][0](storage, ttl)
    return storage
