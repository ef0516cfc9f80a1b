"""Optional capabilities a storage or router declares (docs/protocol.md, "Capabilities").

The core protocols (:class:`~reactor.ports.storage.Storage`,
:class:`~reactor.ports.router.Router`) are what every adapter implements; a capability is a
promise some adapters make on top. Each is a runtime-checkable protocol that the core checks
with ``isinstance`` instead of probing for concrete adapter classes or undeclared attributes:

* :class:`InProcess` (a class attribute): nothing the backend is given leaves the process;
* :class:`RunsJobsInline`: a router that runs each job inside ``enqueue`` through a bound
  handler (``inline://``);
* :class:`HostsEmbeddedWorkers`: a router that starts in-process worker threads on demand
  (``local://``);
* :class:`KnowsConsumers`: a router that knows whether anything in this process consumes it
  (``local://``), so a wait that times out can say why;
* :class:`EnqueuesMany`: a router that queues several jobs in one request (a fan-out batch:
  docs/protocol.md, "Optional fast paths");
* :class:`BoundedNativeDelay`: a router whose transport delays a message natively only up to
  a limit (SQS: 900 s) and re-defers longer delays; the limit can be lowered so the contract
  suite sees the re-deferral work in seconds;
* :class:`SavesContextsTogether`: a context store that saves several new records in one
  request (a fan-out batch's pending elements);
* :class:`BeginsAndSettlesElements`: a map store that reads what an element job needs, and
  settles the element, in one request each;
* :class:`SettlesAndReleases`: a map store that settles an element and releases the
  element's lock in one request;
* :class:`LocksWithContexts`: a context store that takes a run's liveness lock with the run's
  first save or its load, and releases it with the run's final write, in one request each;
* :class:`ReadsClaimsWhenTaking`: a context store whose lock-taking load also reads claims of
  the run (its cancel request) in that same request;
* :class:`ReadsClaimsWhenAppending`: a context store whose incremental checkpoint also reads
  claims of the run in that same request (a running run learns of a cancel from the reply
  of the checkpoint it writes anyway);
* :class:`RunsStepTransactions`: a storage that opens a database transaction a step body
  writes in and writes the step's checkpoint in that same transaction (transactional steps:
  docs/protocol.md, "Transactional steps");
* :class:`Migrates`: a storage or router whose backend has a schema ``reactor migrate``
  brings up to date (docs/protocol.md, "Capabilities");
* :class:`HasVisibilityTimeout`: a router that says how long a delivery stays leased (the
  worker's heartbeat and the sweepers' dispatch leases use it);
* :class:`AppendsContexts`: a context store that writes incremental checkpoints (without it
  every checkpoint is a whole save);
* :class:`KeepsSweepCursors`: a storage that keeps the sweepers' scan cursors (without it they
  live in process memory);
* :class:`KeepsSchedules`: a storage that keeps schedules (without it ``reactor schedules
  add`` is refused and a scheduler keeps its schedules' state in process memory);
* :class:`InspectsMaps`, :class:`InspectsMapRollbacks`, :class:`ResetsSemaphores`: reads and
  an operator's reset the engine never calls, kept by the shipped stores for operators, tests
  and the contract suite.

A router without a capability is still a complete router: the core simply skips what the
capability enables (docs/protocol.md, "Routers").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from reactor.model.records import (
    ContextDelta,
    ContextRecord,
    ElementStart,
    Fence,
    LockClaim,
    RollbackSummary,
)
from reactor.ports.router import Job
from reactor.ports.storage import ScheduleStore, SweepCursorStore

__all__ = [
    "AppendsContexts",
    "BeginsAndSettlesElements",
    "BoundedNativeDelay",
    "EnqueuesMany",
    "HasVisibilityTimeout",
    "HostsEmbeddedWorkers",
    "InProcess",
    "InspectsMapRollbacks",
    "InspectsMaps",
    "JobHandler",
    "KeepsSchedules",
    "KeepsSweepCursors",
    "KnowsConsumers",
    "LocksWithContexts",
    "Migrates",
    "ReadsClaimsWhenAppending",
    "ReadsClaimsWhenTaking",
    "ResetsSemaphores",
    "RunsJobsInline",
    "RunsStepTransactions",
    "SavesContextsTogether",
    "SettlesAndReleases",
    "StepTransaction",
    "declares",
    "in_process",
]

#: What a :class:`RunsJobsInline` router calls with each job: runs it and returns when it is
#: done; raises :class:`~reactor.errors.DeserializationError` for a poison job (the router
#: dead-letters it) and anything else to fail the job.
JobHandler = Callable[[Job], object]


@runtime_checkable
class InProcess(Protocol):
    """A backend that keeps everything it is given in this process's memory: nothing it holds
    is written to disk or sent to another process (docs/security.md, "Secure by default").

    Declared by the built-in ``memory://`` storage and the ``inline://``/``local://`` routers.
    A wrapper around one of them is another backend unless it declares the capability itself.

    Attributes:
        keeps_data_in_process: ``True`` (a class attribute).
    """

    keeps_data_in_process: ClassVar[Literal[True]]


def in_process(backend: object) -> bool:
    """Whether ``backend`` declares :class:`InProcess`.

    Args:
        backend: a storage or a router.

    Returns:
        ``True`` only when the backend's class sets ``keeps_data_in_process = True``.
    """
    return getattr(type(backend), "keeps_data_in_process", False) is True


@runtime_checkable
class RunsJobsInline(Protocol):
    """A router that runs every job inside :meth:`~reactor.ports.router.JobSink.enqueue`, in
    the enqueuing thread, through a handler bound once (docs/protocol.md, "Capabilities").

    ``reactor.configure`` binds the job layer's handlers to such a router when it has none
    (:func:`reactor.jobs.handlers.bind_inline`). Declared by ``inline://``
    (:class:`reactor.memory.InlineRouter`).
    """

    def bind(self, handler: JobHandler) -> None:
        """Set the function that runs jobs; jobs enqueued from now on run through it.

        Args:
            handler: ``handler(job)``; see :data:`JobHandler`.
        """
        ...

    @property
    def bound(self) -> bool:
        """Whether a handler is bound (a bound router is left alone by ``configure``)."""
        ...


@runtime_checkable
class HostsEmbeddedWorkers(Protocol):
    """A router that hosts in-process workers, started lazily by its first enqueue
    (docs/protocol.md, "Capabilities").

    ``reactor.configure`` attaches :attr:`workers` worker threads to such a router when it
    built the router from a URL (:func:`reactor.jobs.embedded.bind_local_workers`). Declared
    by ``local://`` (:class:`reactor.memory.LocalRouter`).
    """

    @property
    def workers(self) -> int:
        """How many worker threads to attach (0: none, the router is a bare queue)."""
        ...

    def attach_consumers(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        """Attach in-process consumers that the router starts and stops.

        Args:
            start: starts the consumers; called once, by the first enqueue after this call
                (at once when jobs are already queued), outside the router's locks.
            stop: stops them and waits for their jobs in flight; called when the router is
                closed (only when they were started).

        Raises:
            RouterError: the router is closed.
        """
        ...


@runtime_checkable
class KnowsConsumers(Protocol):
    """A router that knows whether anything in this process consumes it
    (docs/protocol.md, "Capabilities").

    A caller waiting for a background run (:meth:`reactor.engine.dispatch.DispatchHandle.wait`)
    reads both before and after its wait: when nothing consumed the router meanwhile, its
    timeout message says that no worker consumes it. Declared by ``local://``
    (:class:`reactor.memory.LocalRouter`); a shared queue consumed by other processes cannot
    know, so it does not declare it.
    """

    @property
    def has_consumers(self) -> bool:
        """Whether in-process consumers (embedded workers) consume the router right now."""
        ...

    @property
    def receive_count(self) -> int:
        """How many ``receive`` calls the router has served so far (a monotonic counter)."""
        ...


@runtime_checkable
class Migrates(Protocol):
    """A storage or router whose backend has a versioned schema that ``reactor migrate``
    brings up to date (docs/protocol.md, "Capabilities"; the PostgreSQL adapter). A backend
    without one has nothing to migrate.
    """

    def migrate(self) -> list[int]:
        """Apply every migration the schema lacks; idempotent, safe for several processes
        at once.

        Returns:
            The versions this call applied, ascending (``[]``: already up to date).

        Raises:
            StorageError or RouterError: the backend failed or refused (nothing applied).
        """
        ...


@runtime_checkable
class EnqueuesMany(Protocol):
    """A router that queues several jobs in one request (docs/protocol.md, "Optional fast
    paths"); the engine enqueues one by one on a router without it."""

    def enqueue_many(self, jobs: Sequence[Job]) -> list[str]:
        """Queue every job of ``jobs``, visible at once, as one request where the backend can.

        Args:
            jobs: the envelopes, in order.

        Returns:
            Their ids, in order.

        Raises:
            EncodeError: an envelope cannot be encoded (nothing is queued).
            RouterError: the backend failed (any subset may be queued).
        """
        ...


@runtime_checkable
class BoundedNativeDelay(Protocol):
    """A router whose transport delays a message natively for at most
    :attr:`native_delay_limit` seconds (SQS: 900 s); it honours any longer delay by
    re-deferring the job until it is due, never by capping it (docs/protocol.md, "Routers":
    any finite delay). A router with such a limit declares it, so the contract suite can lower
    it and watch a delay beyond it be honoured (docs/contract-suite.md, "Declarations are
    checked")."""

    @property
    def native_delay_limit(self) -> float:
        """The longest delay, in seconds, the transport applies to one message by itself."""
        ...

    def limit_native_delay(self, seconds: float) -> None:
        """Use at most ``seconds`` of native delay per leg from now on (a test lowers it to see
        re-deferral in seconds; production keeps the transport's own maximum).

        Args:
            seconds: the new limit, at least 1 and at most the transport's maximum.

        Raises:
            ValueError: ``seconds`` is outside those bounds or not finite.
        """
        ...


@runtime_checkable
class SavesContextsTogether(Protocol):
    """A context store that saves several records in one request (docs/protocol.md, "Optional
    fast paths"); the engine saves one by one on a store without it."""

    def save_many(self, records: Sequence[ContextRecord]) -> None:
        """Optional fast path: unfenced :meth:`save` of each record, sent together where the
        backend can (one request); not atomic across records (docs/protocol.md, "Optional
        fast paths"). The engine calls :meth:`save` per record when a store lacks it.

        Raises:
            ContextTooLargeError: a document exceeds the backend's limit (the records before
                it may be written).
            StorageError: the backend failed (any subset may be written).
        """
        ...


@runtime_checkable
class BeginsAndSettlesElements(Protocol):
    """A map store with the element job's two fast paths (docs/protocol.md, "Optional fast
    paths"); on a store without them the engine makes the calls they stand for
    (:mod:`reactor.engine.fast_paths`)."""

    def begin_element(self, map_id: str, index: int, context_id: str | None) -> ElementStart:
        """Optional fast path: what an element job reads before it runs, in one request where
        the backend can (docs/protocol.md, "Optional fast paths"): :meth:`metadata`, whether
        slot ``index`` is stored (:meth:`result_slots`) and :meth:`failed_context`; then, when
        ``context_id`` is given (a fresh element), the map is known, the slot is not stored
        and no element failed, :meth:`append_element` of ``context_id``.

        Returns:
            An :class:`~reactor.model.records.ElementStart` (``position`` set when appended).

        Raises:
            ValueError: ``index`` is negative.
            StorageError: the backend failed.
        """
        ...

    def settle_element(
        self, map_id: str, index: int, value: str, *, failed_context: str | None = None
    ) -> int:
        """Optional fast path: settle one element in one request where the backend can
        (docs/protocol.md, "Optional fast paths"), in this order: :meth:`set_failed_context`
        of ``failed_context`` when given (first wins), :meth:`put_result` of slot ``index``,
        :meth:`add_to_counter` ``-1``.

        Returns:
            The counter after the decrement.

        Raises:
            ValueError: ``index`` is negative.
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class LocksWithContexts(Protocol):
    """A context store that writes or reads a record and takes or releases the lock guarding
    it in one request (docs/protocol.md, "Optional fast paths").

    Each method is exactly the composition :mod:`reactor.engine.fast_paths` makes without it,
    made atomic: the lock operations are ``LockStore.acquire``/``release`` of the same
    storage, with the same fencing tokens (docs/coordination.md, "Fencing tokens"). An adapter
    that cannot do one in one request (e.g. the lock and the record live on different Redis
    Cluster slots) makes the composition itself. Declared by the Redis storage's context
    store.
    """

    def save_taking(self, record: ContextRecord, claim: LockClaim) -> int:
        """Take ``claim`` and, only when granted, save ``record`` fenced with the new token.

        Args:
            record: the run's first whole save.
            claim: the lock to take.

        Returns:
            The fencing token (>= 1) of the hold now taken, the record written; 0 when another
            owner holds the lock (nothing written).

        Raises:
            ContextTooLargeError, StorageError: as ``ContextStore.save``; the lock is then not
                held (taken and released again if it was).
        """
        ...

    def load_taking(
        self, context_id: str, claim: LockClaim
    ) -> tuple[int, ContextRecord | None]:
        """Take ``claim`` and, only when granted, load the record ``context_id``.

        Returns:
            ``(token, record or None)`` when the lock was taken; ``(0, None)`` when another
            owner holds it (nothing read).

        Raises:
            DeserializationError, StorageError: as ``ContextStore.load``; the lock is then not
                held (taken and released again if it was).
        """
        ...

    def append_releasing(
        self, delta: ContextDelta, fence: Fence, *, announce: str | None = None
    ) -> bool:
        """``AppendsContexts.append(delta, fence=fence)`` and, only when it appended, release the
        lock ``fence.key`` held by ``fence.owner`` and, given ``announce``, publish
        ``delta.status`` on that signals channel (as ``Storage.signals.publish``; a run's
        completion: docs/architecture.md, "Execution invariants").

        Returns:
            As ``append`` (``False``: nothing written, the lock still held).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as ``append`` (nothing
                released).
        """
        ...

    def save_releasing(
        self, record: ContextRecord, fence: Fence, *, announce: str | None = None
    ) -> None:
        """``ContextStore.save(record, fence=fence)``, then release the lock ``fence.key``
        held by ``fence.owner`` and, given ``announce``, publish ``record.status`` on that
        signals channel (as :meth:`append_releasing`).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as ``save`` (nothing
                released).
        """
        ...


@runtime_checkable
class ReadsClaimsWhenTaking(Protocol):
    """A context store whose lock-taking load also reads claims of the run in the same request
    (docs/protocol.md, "Optional fast paths"): exactly ``load_taking`` followed, when the lock
    was granted, by ``ClaimStore.interrupt_resumes(context_id, step_paths)`` of the same
    storage, made one request. An execution continuing a stored run reads its cancel request
    this way at no extra round trip (docs/run-control.md, "Cancel"). Declared by the Redis
    storage's locking context store.
    """

    def load_taking_claims(
        self, context_id: str, claim: LockClaim, step_paths: Sequence[str]
    ) -> tuple[int, ContextRecord | None, dict[str, str]]:
        """Take ``claim`` and, only when granted, load the record ``context_id`` and read its
        claims at ``step_paths``.

        Args:
            context_id: the run.
            claim: the lock to take.
            step_paths: the claim paths to read (``ClaimStore.claim_interrupt_resume``'s).

        Returns:
            ``(token, record or None, {step_path: payload} for the claimed paths only)`` when
            the lock was taken; ``(0, None, {})`` when another owner holds it (nothing read).

        Raises:
            DeserializationError, StorageError: as ``ContextStore.load``; the lock is then not
                held (taken and released again if it was).
        """
        ...


@runtime_checkable
class ReadsClaimsWhenAppending(Protocol):
    """A context store whose incremental checkpoint also reads claims of the run in the same
    request (docs/protocol.md, "Optional fast paths"): exactly ``AppendsContexts.append`` followed,
    when it appended, by ``ClaimStore.interrupt_resumes(delta.context_id, step_paths)`` of the
    same storage, made one request. A running run learns of its cancel request this way from
    the checkpoint it writes after each step, at no extra round trip (docs/run-control.md,
    "Cancel"). Declared by the Redis storage's locking context store.
    """

    def append_reading_claims(
        self, delta: ContextDelta, fence: Fence | None, step_paths: Sequence[str]
    ) -> tuple[bool, dict[str, str]]:
        """Append ``delta`` (fenced with ``fence`` when given) and, once appended, read the
        run's claims at ``step_paths``.

        Returns:
            ``(True, {step_path: payload} for the claimed paths only)`` when appended;
            ``(False, {})`` when nothing was written (as ``append`` returning ``False``).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as ``AppendsContexts.append``
                (nothing written).
        """
        ...


@runtime_checkable
class SettlesAndReleases(Protocol):
    """A map store that settles an element and releases the element's lock in one request
    (docs/protocol.md, "Optional fast paths"): exactly ``settle_element`` (of
    :mod:`reactor.engine.fast_paths`) followed by ``LockStore.release`` of the same storage.
    Declared by the Redis storage's map store.
    """

    def settle_releasing(
        self, map_id: str, index: int, value: str, *, failed_context: str | None = None,
        fence: Fence,
    ) -> int:
        """Settle element ``index`` (the failed context first when given, then the slot, then
        the counter - 1), then release the lock ``fence.key`` held by ``fence.owner``.

        Returns:
            The counter after the decrement.

        Raises:
            ValueError: ``index`` is negative.
            StorageError: the backend failed.
        """
        ...


class StepTransaction(Protocol):
    """One open database transaction of a transactional step (docs/protocol.md,
    "Transactional steps"): the step body writes through :attr:`connection`, the engine then
    writes the step's checkpoint inside :meth:`binding` and calls :meth:`commit`; a failed
    attempt, or anything that stops the step before its checkpoint, calls :meth:`rollback`.
    """

    @property
    def connection(self) -> Any:
        """The driver connection the body writes through (inside the transaction)."""
        ...

    def binding(self) -> AbstractContextManager[None]:
        """While entered, every storage operation **of the calling thread** on the storage
        that opened the transaction runs inside it (other threads keep their own
        connections: a lease renewal is never delayed to the commit). The engine enters it
        when the body returned and leaves it at the commit or rollback, so what the engine
        reads in between (the run's cancel request) needs no second connection."""
        ...

    def check(self) -> None:
        """Called once the body succeeded, before the transaction is kept for the checkpoint.

        Raises:
            StepTransactionError: the transaction cannot commit (a failed statement aborted
                it, its connection was closed or dropped); the engine rolls it back and fails
                the attempt with this error.
        """
        ...

    def commit(self) -> None:
        """Commit and give the connection back.

        Raises:
            StorageError: the commit failed or its reply was lost: whether it was applied is
                unknown (the next execution of the run finds out from the checkpoint).
        """
        ...

    def rollback(self) -> None:
        """Roll back and give the connection back; a no-op once committed or rolled back.
        Never raises (a connection the server dropped has rolled back already)."""
        ...


@runtime_checkable
class RunsStepTransactions(Protocol):
    """A storage that runs transactional steps (docs/protocol.md, "Transactional steps"):
    the body's writes, the step's checkpoint and everything else that checkpoint writes
    commit together or not at all. Declared by the PostgreSQL storage.
    """

    def begin_step_transaction(self) -> StepTransaction:
        """Open a transaction on a connection of its own (held until commit or rollback).

        Raises:
            StorageError: the backend failed (nothing is open).
        """
        ...


@runtime_checkable
class HasVisibilityTimeout(Protocol):
    """A router that says how long a delivery stays leased (docs/protocol.md, "Capabilities").

    The worker's visibility heartbeat and the sweepers' dispatch leases take the router's
    :attr:`visibility_timeout` when it is a positive number, else the ``visibility_timeout``
    setting (:func:`reactor.engine.dispatch_leases.router_visibility`). Declared by every
    :class:`~reactor.generic.GenericRouter` (``local://``, ``memqueue://`` and the shipped
    routers).

    Attributes:
        visibility_timeout: seconds a delivery stays invisible before it comes back (an
            attribute every instance of the class has; a value that is not a positive number
            is ignored).
    """

    visibility_timeout: float


@runtime_checkable
class AppendsContexts(Protocol):
    """A context store that writes incremental checkpoints (docs/protocol.md, "Incremental
    checkpoints"); the engine saves the whole context (``ContextStore.save``) on a store
    without it. Declared by every shipped context store."""

    def append(self, delta: ContextDelta, *, fence: Fence | None = None) -> bool:
        """Append one incremental checkpoint to a stored context, unless fenced off.

        In one atomic write: check the fence (the rule of ``ContextStore.save``), check that the
        stored record's :attr:`~reactor.model.records.ContextRecord.base` is ``delta.base`` and
        that exactly ``delta.position - 1`` segments follow it, then append ``delta.segment``,
        set the record's ``status`` and ``updated_at`` (moving its scan index and page entry as
        ``save`` does), raise the stored fence to ``fence.token`` and re-stamp the retention of
        the record and all its segments to ``context_ttl``. Readers never see a segment
        without the head that counts it.

        Args:
            delta: the segment and the head fields it changes.
            fence: the writer's hold on the lock guarding the record, or ``None``.

        Returns:
            ``True`` when appended; ``False`` when nothing was written because the record is
            absent or expired, has another base, or holds another number of segments (the
            writer's view is not the stored one: it saves the whole context instead).

        Raises:
            StaleWriterError: ``fence.token`` is lower than the record's stored fence (nothing
                is written).
            ContextTooLargeError: the record with this segment exceeds the backend's document
                limit (nothing is written).
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class KeepsSweepCursors(Protocol):
    """A storage that keeps the sweepers' scan cursors between ticks (docs/protocol.md, "Sweep
    cursors"); without it each process keeps them in memory. Declared by the generic storages
    (``memory://``, MongoDB, DynamoDB, PostgreSQL, the SQLite example) and Redis.

    Attributes:
        sweep_cursors: the cursor store (an attribute every instance of the class has; ``None``
            is taken as absent).
    """

    sweep_cursors: SweepCursorStore


@runtime_checkable
class KeepsSchedules(Protocol):
    """A storage that keeps schedules (docs/protocol.md, "Schedules"; docs/schedules.md):
    their stored definitions and the schedulers' shared state. Without it ``reactor schedules
    add`` is refused and each scheduler keeps the state of its code schedules in process memory
    (one run per tick still holds: the tick's idempotency key decides it). Declared by the
    generic storages (``memory://``, MongoDB, DynamoDB, PostgreSQL, the SQLite example) and
    Redis.

    Attributes:
        schedules: the schedule store (an attribute every instance of the class has; ``None``
            is taken as absent).
    """

    schedules: ScheduleStore


@runtime_checkable
class InspectsMaps(Protocol):
    """A map store that reads a map's counter and its element index by position
    (docs/protocol.md, "Capabilities"). The engine never calls these: operators, tests and
    the contract suite do (the suite checks them only on a store that declares this).
    Declared by every shipped map store."""

    def counter(self, map_id: str) -> int | None:
        """Read the counter (``MapStore.add_to_counter``'s), ``None`` when the map is unknown.

        Raises:
            StorageError: the backend failed.
        """
        ...

    def element_ids(self, map_id: str, *, start: int = 0, limit: int | None = None) -> list[str]:
        """Element context ids in append order (``MapStore.append_element``'s), from position
        ``start``, at most ``limit`` (``None``: all).

        Raises:
            StorageError: the backend failed.
        """
        ...

    def element_id(self, map_id: str, position: int) -> str | None:
        """The id at ``position`` (negative counts from the end), ``None`` when out of range.

        Raises:
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class InspectsMapRollbacks(Protocol):
    """A map-rollback store that reports a rollback's progress (docs/protocol.md,
    "Capabilities"). The engine never calls these: operators, tests and the contract suite do
    (the suite checks them only on a store that declares this). Declared by every shipped
    map-rollback store."""

    def indexes_seen(self, map_id: str, indexes: Sequence[int]) -> list[bool]:
        """For each element index of ``indexes``, whether a stored outcome
        (``MapRollbackStore.put_outcome``) named it.

        Raises:
            StorageError: the backend failed.
        """
        ...

    def summary(self, map_id: str) -> RollbackSummary | None:
        """Progress counts (total, settled, outstanding, failed), ``None`` when this map never
        rolled back.

        Raises:
            StorageError: the backend failed.
        """
        ...


@runtime_checkable
class ResetsSemaphores(Protocol):
    """A semaphore store with the operators' reset (docs/protocol.md, "Capabilities"). The
    engine never calls it; the contract suite checks it only on a store that declares this.
    Declared by every shipped semaphore store."""

    def reset(self, key: str) -> None:
        """Drop every lease of semaphore ``key`` (``SemaphoreStore.state`` then reads ``None``).

        Raises:
            StorageError: the backend failed.
        """
        ...


#: ``declares``' answers, by (the object's type, the protocol).
_DECLARED: dict[tuple[type[Any], type[Any]], bool] = {}


def declares(obj: object, protocol: Any) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable capability protocol, answered
    once per type of ``obj``: the engine asks on every checkpoint and job, and a protocol
    ``isinstance`` walks the protocol's members each time (docs/protocol.md, "Capabilities").
    A capability is a property of an adapter's class (its methods and class attributes, or an
    attribute every instance of the class sets, such as :class:`HasVisibilityTimeout`'s), so
    every instance of one type answers alike.

    Args:
        obj: the store or router.
        protocol: a ``runtime_checkable`` protocol of this module (typed ``Any``: a protocol
            class is not a concrete ``type`` to mypy; callers ``cast`` after a ``True``).

    Returns:
        Whether ``obj`` has every member of ``protocol``.
    """
    key = (type(obj), protocol)
    found = _DECLARED.get(key)
    if found is None:
        found = _DECLARED[key] = isinstance(obj, protocol)
    return found
