"""Declarations: every capability and limit an adapter declares is checked by behaviour
(docs/contract-suite.md, "Declarations are checked"; docs/protocol.md, "Capabilities").

An adapter certifies with what it declares: ``Storage.capabilities`` (its signals, its document
size limit, its clock and clock-skew budget) and the optional protocols of
``reactor.ports.capabilities`` (fast paths, in-process), ``reactor.ports.inspection`` (ping,
counts) and ``DeadLetterAdmin``. The other modules take those
declarations at their word: a declared size limit makes the "too large" tests run, no limit
makes them not applicable; a server clock makes the skew test not applicable; an undeclared
fast path is composed. So a declaration that contradicts the adapter's behaviour would pass
them. The tests here close that door: each probes the declaration against what the adapter
does, and none of them skips (a declaration that cannot be exercised passes as it stands).

The tests report under the concern of the part they check (``contexts``, ``surface``,
``routers``): the conformance table has no row of its own for declarations.
:data:`DECLARATIONS` names, for every declaration, the test that checks it.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from reactor.engine import fast_paths
from reactor.errors import ContextTooLargeError, RouterError, StorageError
from reactor.memory.clock import ManualClock
from reactor.model.records import ContextDelta, ContextRecord, Fence, LockClaim
from reactor.ports.capabilities import (
    BeginsAndSettlesElements,
    BoundedNativeDelay,
    EnqueuesMany,
    LocksWithContexts,
    ReadsClaimsWhenAppending,
    ReadsClaimsWhenTaking,
    SavesContextsTogether,
    SettlesAndReleases,
    in_process,
)
from reactor.ports.inspection import Pingable, QueueInspector, QueueStats, SweepIndexInspector
from reactor.ports.router import DeadLetterAdmin, Job, Router
from reactor.ports.storage import Storage
from reactor_contract._support import SUITE_DOC, context, eventually, step_result, teach, uid
from reactor_contract.optional_operations import appender
from reactor_contract.plugin import open_router, open_storage
from reactor_contract.probe import ClockProbe, Probe

__all__ = [
    "DECLARATIONS",
    "UNBOUNDED_PROBE_BYTES",
    "DeclaredContextLimitsContract",
    "DeclaredFastPathsContract",
    "DeclaredInspectionContract",
    "DeclaredNativeDelayContract",
    "DeclaredRouterCapabilitiesContract",
    "DeclaredRouterDelaysContract",
    "DeclaredStorageClockContract",
    "document_of",
]

_DECLARED = f'{SUITE_DOC}, "Declarations are checked"'
_ADAPTER_CAPS = 'docs/writing-an-adapter.md, "Capabilities"'

#: The context a storage declaring no size limit must store and read back intact (1 MiB).
UNBOUNDED_PROBE_BYTES = 1024 * 1024
#: A job delay no test waits out, and the shorter delay whose delivery proves time has passed.
_FAR_DELAY, _NEAR_DELAY = 7200.0, 3.0
#: How long the router test waits at most for the job of the short delay to come.
_NEAR_WAIT = 60.0
#: The native delay limit a ``BoundedNativeDelay`` router is lowered to, and the delay, a few
#: legs of it, that must still be honoured whole; seconds.
_LOWERED_LIMIT, _LEGS_DELAY = 1.0, 4.0
#: How much earlier than its delay a job may come: whole-second rounding and clock steps.
_EARLY_SLACK = 0.5
#: How long ``queue_stats`` may lag behind the queue (approximate counts catch up).
_STATS_WAIT = 15.0

#: Every declaration an adapter makes, and the test that checks it by behaviour (or why none
#: can). ``tests/contract_suite/test_declarations.py`` keeps it complete: every field of
#: ``Capabilities``, every protocol of ``reactor.ports.capabilities`` and
#: ``reactor.ports.inspection``, and ``DeadLetterAdmin`` are listed.
DECLARATIONS: dict[str, str] = {
    "Capabilities.signals": (
        "test_surface.test_capabilities_are_declared_and_consistent (True: storage.signals is "
        "a SignalStore; False: it is None, so undeclared signals cannot be used) and "
        "test_signals (declared signals deliver)"
    ),
    "Capabilities.max_document_bytes": (
        "test_a_context_of_the_declared_size_limit_is_stored_and_one_byte_more_is_refused "
        "(a limit: exactly the limit is stored intact, one byte more raises "
        "ContextTooLargeError and writes nothing; None: a 1 MiB context is stored intact); "
        "test_appends_up_to_the_declared_size_limit_are_stored (a run brought to the limit, "
        "or to 1 MiB, by an append); test_contexts and test_documents (over the limit is "
        "refused)"
    ),
    "Capabilities.clock": (
        "test_a_declared_server_clock_cannot_be_injected ('server': the probe cannot make "
        "now() follow another clock); test_surface.test_clock_is_epoch_seconds_and_never_"
        "runs_backwards; test_rate_limits skew test ('application', with a ClockProbe)"
    ),
    "Capabilities.clock_skew": (
        "test_the_declared_clock_skew_is_a_usable_budget (finite, >= 0, 0 on a server "
        "clock); test_leases (holders give it up early and still keep their leases)"
    ),
    "InProcess": (
        "test_an_in_process_declaration_is_exactly_true (the class attribute is True, "
        "nothing else); test_a_declared_in_process_storage_shows_nothing_to_another_process "
        "and test_a_declared_in_process_router_shows_nothing_to_another_process (another "
        "process opening the same URL and namespace sees nothing)"
    ),
    "DeadLetterAdmin": (
        "test_dead_letters (declared: every operation) and "
        "test_no_router_capability_is_half_declared (every member or none)"
    ),
    "RunsStepTransactions": (
        "test_step_transactions (declared: the bound thread's writes commit or vanish "
        "together, other threads stay outside, a stale fence is refused inside; undeclared: "
        "n/a, and the engine refuses transactional steps)"
    ),
    "StepTransaction": "test_step_transactions (what begin_step_transaction returns)",
    "Migrates": (
        "none by behaviour: a migration is the schema's own business, checked by the "
        "adapter's tests; the suite runs against a schema the adapter migrated itself"
    ),
    "QueueInspector": "test_declared_queue_stats_count_the_queue",
    "SweepIndexInspector": "test_declared_sweep_index_sizes_count_what_is_stored",
    "Pingable": "test_a_declared_storage_ping_answers and test_a_declared_router_ping_answers",
    "RunsJobsInline": "not checked: the inline:// router is built into reactor, not an adapter",
    "HostsEmbeddedWorkers": "not checked: the local:// router is built into reactor",
    "KnowsConsumers": "not checked: the local:// router is built into reactor",
    "EnqueuesMany": (
        "test_routers.test_enqueue_all_* (through reactor.engine.fast_paths, native or "
        "composed); test_no_router_capability_is_half_declared"
    ),
    "SavesContextsTogether": "test_saving_contexts_together_saves_every_record",
    "AppendsContexts": (
        "test_contexts (declared: incremental checkpoints, fenced, conditional on the base and "
        "the segment count; undeclared: those tests are n/a and the engine saves whole "
        "contexts)"
    ),
    "KeepsSweepCursors": (
        "test_sweeps (the scans the cursors page through); the cursor records themselves are "
        "checked by the adapter's tests: undeclared, the sweepers keep cursors in memory"
    ),
    "KeepsSchedules": (
        "test_schedules (declared: create, read, compare-and-set and compare-and-delete on the "
        "version, versions never issued twice, racing schedulers with exactly one winner, the "
        "listing in code point order paged to the end, exact names and verbatim documents, "
        "no expiry, no leak across prefixes; undeclared: n/a, schedules then live in process "
        "memory and `reactor schedules add` is refused)"
    ),
    "HasVisibilityTimeout": (
        "test_routers (a delivery not acknowledged within the router's visibility timeout "
        "comes back); the engine only sizes heartbeats and dispatch leases with it"
    ),
    "InspectsMaps": (
        "test_maps (declared: counter, element_ids, element_id; undeclared: n/a, the other "
        "map tests read the same state with required operations)"
    ),
    "InspectsMapRollbacks": (
        "test_map_rollbacks (declared: indexes_seen and summary follow the stored outcomes; "
        "undeclared: n/a)"
    ),
    "ResetsSemaphores": "test_semaphores (declared: reset drops every lease; undeclared: n/a)",
    "BeginsAndSettlesElements": "test_maps element fast-path tests (native or composed)",
    "SettlesAndReleases": "test_maps.test_settle_releasing_* (native or composed)",
    "LocksWithContexts": "test_contexts lock-with-record fast-path tests (native and composed)",
    "ReadsClaimsWhenTaking": "test_a_lock_taking_load_reads_the_claims_of_the_run",
    "ReadsClaimsWhenAppending": "test_a_claim_reading_append_reads_the_claims_only_when_appended",
    "partial fast paths": (
        "test_no_fast_path_is_half_declared (a store with some members of a fast-path "
        "protocol but not all is not using it: the engine and the suite compose instead)"
    ),
    "router delays": (
        "test_a_router_never_caps_a_delay (any finite delay, docs/protocol.md: a job of a "
        "far delay is not delivered before one of a near delay)"
    ),
    "BoundedNativeDelay": (
        "test_a_delay_beyond_a_declared_native_limit_is_honoured_whole and "
        "test_a_retry_beyond_a_declared_native_limit_is_honoured_whole (the limit lowered to "
        "1 s, a 4 s delay comes no earlier); test_no_router_capability_is_half_declared"
    ),
}


def document_of(size: int) -> str:
    """A JSON document of exactly ``size`` UTF-8 bytes (``size >= 3``) with no character any
    JSON encoder escapes (``[11...1]``), so a backend that stores it inside an encoded document
    adds only its fixed overhead (docs/writing-an-adapter.md, "Capabilities")."""
    if size < 3:
        raise ValueError(f"a document of {size} bytes is too small to be a JSON array")
    return "[" + "1" * (size - 2) + "]"


class DeclaredContextLimitsContract:
    """``Capabilities.max_document_bytes`` is the real limit, neither larger nor smaller."""

    reactor_concern = "contexts"

    @pytest.mark.obligations("O-declarations-2", "O-declarations-3", "O-declarations-4")
    def test_a_context_of_the_declared_size_limit_is_stored_and_one_byte_more_is_refused(
        self, storage: Storage
    ) -> None:
        limit = storage.capabilities.max_document_bytes
        size = UNBOUNDED_PROBE_BYTES if limit is None else limit
        record = dataclasses.replace(context(document=document_of(size)), base="b1")
        try:
            storage.contexts.save(record)
        except ContextTooLargeError as exc:
            declared = (
                "declares no document size limit (Capabilities.max_document_bytes is None)"
                if limit is None
                else f"declares max_document_bytes={limit}"
            )
            pytest.fail(teach(
                "contexts",
                f"a storage that {declared} stores a context of {size} bytes; it refused it "
                f"({exc})",
                "a size check off by one (>= instead of >), a limit counted on an encoding "
                "larger than the document, or a real limit left undeclared: declare the "
                "largest document the storage really accepts",
                _ADAPTER_CAPS,
            ))
        loaded = storage.contexts.load(record.context_id)
        assert loaded == record, teach(
            "contexts",
            f"a context of {size} bytes, within the declared limit, reads back intact "
            f"(got {'nothing' if loaded is None else f'{loaded.stored_bytes} bytes'})",
            "a document truncated to a backend limit nobody declared",
            _ADAPTER_CAPS,
        )
        if limit is None:
            return
        over = dataclasses.replace(context(document=document_of(limit + 1)), base="b1")
        with pytest.raises(ContextTooLargeError):
            storage.contexts.save(over)
        assert storage.contexts.load(over.context_id) is None, teach(
            "contexts",
            "a context one byte over the declared limit is refused and nothing of it is written",
            "writing the record before checking its size",
            _ADAPTER_CAPS,
        )


    @pytest.mark.obligations("O-declarations-5")
    def test_appends_up_to_the_declared_size_limit_are_stored(self, storage: Storage) -> None:
        limit = storage.capabilities.max_document_bytes
        total = UNBOUNDED_PROBE_BYTES if limit is None else limit
        record = dataclasses.replace(context(document=document_of(total // 2)), base="b1")
        storage.contexts.save(record)
        segment = document_of(total - total // 2)
        delta = ContextDelta(record.context_id, "b1", 1, "running", 1_700_000_050.0, segment)
        try:
            appended = appender(storage).append(delta)
        except ContextTooLargeError as exc:
            pytest.fail(teach(
                "contexts",
                f"an append that brings a run to {total} bytes, within the declared limit "
                f"({limit}), is stored; it was refused ({exc})",
                "an append's size counted with >= or on the encoded segment, not on the "
                "run's document and segments (ContextRecord.stored_bytes)",
                _ADAPTER_CAPS,
            ))
        loaded = storage.contexts.load(record.context_id)
        assert appended and loaded is not None and loaded.segments == (segment,), teach(
            "contexts",
            f"an append within the declared limit is stored whole (run of {total} bytes)",
            "a segment truncated to a backend limit nobody declared",
            _ADAPTER_CAPS,
        )


class DeclaredStorageClockContract:
    """``Capabilities.clock``, ``clock_skew`` and ``InProcess`` say what the storage is."""

    reactor_concern = "surface"

    @pytest.mark.obligations("O-declarations-6")
    def test_a_declared_server_clock_cannot_be_injected(
        self, storage: Storage, probe: Probe
    ) -> None:
        if storage.capabilities.clock != "server" or not isinstance(probe, ClockProbe):
            return  # an application clock, or no way to inject one: nothing contradicts it
        injected = ManualClock(2_000_000_000.0)
        clocked = probe.with_clock(injected)
        if clocked is None:
            return
        try:
            followed = math.isclose(clocked.now(), injected(), abs_tol=1.0)
            injected.advance(3600.0)
            followed = followed and math.isclose(clocked.now(), injected(), abs_tol=1.0)
        finally:
            clocked.close()
        assert not followed, teach(
            "surface",
            "a storage that declares Capabilities.clock='server' judges time by a clock no "
            "client sets; this one's now() follows the clock its probe injected (a clock read "
            "in the application), so the clock-skew tests were skipped for nothing",
            "declaring clock='server' for a store that reads time.time(): declare "
            "clock='application' with the clock_skew budget of its processes",
            _ADAPTER_CAPS,
        )

    @pytest.mark.obligations("O-declarations-7")
    def test_the_declared_clock_skew_is_a_usable_budget(self, storage: Storage) -> None:
        caps = storage.capabilities
        skew = caps.clock_skew
        assert isinstance(skew, int | float) and math.isfinite(skew) and skew >= 0, teach(
            "surface",
            f"Capabilities.clock_skew is a finite number of seconds >= 0 (got {skew!r})",
            "a negative or infinite budget: holders would keep leases past their lapse",
            _ADAPTER_CAPS,
        )
        assert caps.clock == "application" or skew == 0, teach(
            "surface",
            f"a server clock has no skew between clients: clock_skew is 0 (got {skew!r})",
            "a skew budget declared with clock='server' (the clock is in fact the "
            "application's, or the budget is left over from one)",
            _ADAPTER_CAPS,
        )

    @pytest.mark.obligations("O-declarations-8")
    def test_an_in_process_declaration_is_exactly_true(self, storage: Storage) -> None:
        declared = getattr(type(storage), "keeps_data_in_process", None)
        assert declared in (None, True, False), teach(
            "surface",
            "keeps_data_in_process (reactor.ports.capabilities.InProcess) is the class "
            f"attribute True or absent; {declared!r} is read as not declared",
            "a truthy value other than True (the engine tests `is True`)",
            _ADAPTER_CAPS,
        )

    @pytest.mark.obligations("O-declarations-9")
    def test_a_declared_in_process_storage_shows_nothing_to_another_process(
        self, reactor_storage_url: str
    ) -> None:
        token = uid("inproc")
        storage = open_storage(reactor_storage_url, token)
        try:
            if not in_process(storage):
                return
            record = context(status="running")
            storage.contexts.save(record)
            seen = _in_another_process(_LOAD_CONTEXT, reactor_storage_url, token,
                                       record.context_id)
        finally:
            storage.close()
        assert seen == "absent", teach(
            "surface",
            "a storage that declares keeps_data_in_process (InProcess) keeps what it is given "
            "in this process; a process opening the same URL and namespace read a context "
            "saved here, so secrets would be stored in clear without a key",
            "InProcess declared by a storage that writes to a file or a server (copied from "
            "the memory storage, or inherited by a subclass that is not in memory)",
            'docs/security.md, "Secure by default"',
        )


#: Run in another process: open the storage of ``argv[1]`` in namespace ``argv[2]`` and say
#: whether the context ``argv[3]`` is there.
_LOAD_CONTEXT = """
import sys
from reactor_contract.plugin import open_storage
storage = open_storage(sys.argv[1], sys.argv[2])
try:
    print("present" if storage.contexts.load(sys.argv[3]) is not None else "absent")
finally:
    storage.close()
"""

#: Run in another process: open the router of ``argv[1]`` in namespace ``argv[2]`` and say
#: whether a job is due on it (``argv[3]`` unused).
_RECEIVE_JOB = """
import sys
from reactor_contract.plugin import open_router
router = open_router(sys.argv[1], sys.argv[2])
try:
    print("present" if router.receive(max_jobs=1, wait_seconds=0.5) else "absent")
finally:
    router.close()
"""


def _in_another_process(script: str, url: str, token: str, key: str) -> str:
    """What ``script`` prints when run in a fresh interpreter (this one's environment)."""
    done = subprocess.run(
        [sys.executable, "-c", script, url, token, key],
        capture_output=True, text=True, timeout=_NEAR_WAIT, check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"the other process failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


#: ``(attribute of the storage, fast-path protocol)`` pairs of reactor.ports.capabilities.
_STORAGE_FAST_PATHS: tuple[tuple[str, type], ...] = (
    ("contexts", SavesContextsTogether),
    ("contexts", LocksWithContexts),
    ("contexts", ReadsClaimsWhenTaking),
    ("contexts", ReadsClaimsWhenAppending),
    ("maps", BeginsAndSettlesElements),
    ("maps", SettlesAndReleases),
)


def _members(protocol: type) -> set[str]:
    """The method and property names a protocol declares, its base protocols' included."""
    return {
        name
        for cls in protocol.__mro__ if getattr(cls, "_is_protocol", False)
        for name, value in vars(cls).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def _half_declared(obj: object, where: str, protocol: type, base: type) -> str | None:
    """How ``obj`` has some members of ``protocol`` (beyond ``base``'s) but not all, if so."""
    members = sorted(_members(protocol) - _members(base))
    present = [m for m in members if callable(getattr(obj, m, None))]
    if not present or isinstance(obj, protocol):
        return None
    missing = [m for m in members if m not in present]
    return (f"{where} has {', '.join(present)} but not {', '.join(missing)} of "
            f"{protocol.__name__}")


def _claimed(storage: Storage, record: ContextRecord) -> tuple[list[str], dict[str, str]]:
    """Claim one of two interrupt paths of ``record``: ``(both paths, {claimed: payload})``."""
    claimed, unclaimed = "steps/ask", "steps/other"
    assert storage.claims.claim_interrupt_resume(record.context_id, claimed, '{"resume":1}')
    return [claimed, unclaimed], {claimed: '{"resume":1}'}


class DeclaredFastPathsContract:
    """A fast path is declared whole, and what is declared does what it stands for."""

    reactor_concern = "contexts"

    @pytest.mark.obligations("O-declarations-11")
    def test_no_fast_path_is_half_declared(self, storage: Storage) -> None:
        half = [
            found for attribute, protocol in _STORAGE_FAST_PATHS
            if (found := _half_declared(getattr(storage, attribute), f"storage.{attribute}",
                                        protocol, object)) is not None
        ]
        assert not half, teach(
            "contexts",
            "a fast path is used only when every member of its protocol is there; "
            + "; ".join(half)
            + ": the engine and this suite compose the calls instead, so that code never runs",
            "a fast path half written, or a member misnamed: implement every member, or none",
            'docs/protocol.md, "Optional fast paths"',
        )

    @pytest.mark.obligations("O-declarations-12")
    def test_saving_contexts_together_saves_every_record(self, storage: Storage) -> None:
        records = [context(document=f'{{"n":{n}}}') for n in range(5)]
        fast_paths.save_all(storage.contexts, records)
        loaded = [storage.contexts.load(r.context_id) for r in records]
        assert loaded == records, teach(
            "contexts",
            "save_many (SavesContextsTogether) saves every record it is given, as save does",
            "a batch that drops or truncates a record (the last page of a pipeline unsent)",
            'docs/protocol.md, "Optional fast paths"',
        )

    @pytest.mark.obligations("O-declarations-13")
    def test_a_lock_taking_load_reads_the_claims_of_the_run(self, storage: Storage) -> None:
        record = dataclasses.replace(context(), base="b1")
        storage.contexts.save(record)
        paths, expected = _claimed(storage, record)
        key = f"async:{record.context_id}"
        token, loaded, claims = fast_paths.load_taking_claims(
            storage, record.context_id, LockClaim(key, uid("owner"), 30.0), paths
        )
        assert token >= 1 and loaded == record
        info = storage.locks.info(key)
        assert info is not None and info.token == token
        declared = isinstance(storage.contexts, ReadsClaimsWhenTaking)
        assert claims == (expected if declared else None), teach(
            "contexts",
            "load_taking_claims (ReadsClaimsWhenTaking) returns the claimed paths among "
            f"step_paths with their payloads, and only those (got {claims!r})",
            "claims read before the lock is granted, from another run, or not at all",
            'docs/protocol.md, "Optional fast paths"',
        )
        assert fast_paths.load_taking_claims(
            storage, record.context_id, LockClaim(key, uid("other"), 30.0), paths
        ) == (0, None, None), "another owner holds the lock: nothing is read"

    @pytest.mark.obligations("O-declarations-14")
    def test_a_claim_reading_append_reads_the_claims_only_when_appended(
        self, storage: Storage
    ) -> None:
        record = dataclasses.replace(context(), base="b1")
        storage.contexts.save(record)
        paths, expected = _claimed(storage, record)
        delta = ContextDelta(record.context_id, "b1", 1, "running", 1_700_000_050.0, '{"s":1}')
        declared = isinstance(storage.contexts, ReadsClaimsWhenAppending)
        appended, claims = fast_paths.append_reading_claims(storage, delta, None, paths)
        assert appended and claims == (expected if declared else None), teach(
            "contexts",
            "append_reading_claims (ReadsClaimsWhenAppending) appends, then returns the claimed "
            f"paths among step_paths with their payloads (got {appended!r}, {claims!r})",
            "claims read from another run, or not read at all",
            'docs/protocol.md, "Optional fast paths"',
        )
        stale = ContextDelta(record.context_id, "b1", 1, "running", 1_700_000_060.0, '{"s":9}')
        refused = fast_paths.append_reading_claims(
            storage, stale, Fence(f"async:{record.context_id}", "me", 1), paths
        )
        assert refused == (False, None), "a refused append reads nothing and writes nothing"
        loaded = storage.contexts.load(record.context_id)
        assert loaded is not None and loaded.segments == ('{"s":1}',)


def _typed_or_working(
    call: Callable[[], object], typed: type[Exception], concern: str, what: str
) -> None:
    """``call()`` works or raises ``typed``; any other exception fails the test."""
    try:
        call()
    except typed:
        pass  # the rule: failures are typed
    except Exception as exc:
        pytest.fail(teach(
            concern,
            f"{what} works or raises {typed.__name__}; it raised "
            f"{type(exc).__module__}.{type(exc).__qualname__}: {str(exc)[:120]}",
            "a driver call outside the adapter's try/except",
            f'{SUITE_DOC}, "Rules: driver errors"',
        ))


_SWEEP_INDEXES = frozenset({"runs", "steps", "maps", "map_rollbacks"})


class DeclaredInspectionContract:
    """The inspection capabilities a storage declares (``reactor info``, ``reactor ping``;
    docs/protocol.md, "Inspection capabilities") answer, and count what is stored."""

    reactor_concern = "surface"

    @pytest.mark.obligations("O-declarations-16")
    def test_a_declared_storage_ping_answers(
        self, storage: Storage, reactor_storage_url: str
    ) -> None:
        if not isinstance(storage, Pingable):
            return
        storage.ping()  # one round trip; raises StorageError only when the backend fails
        closed = open_storage(reactor_storage_url)
        closed.close()
        assert isinstance(closed, Pingable)
        _typed_or_working(closed.ping, StorageError, "surface", "ping() of a closed storage")

    @pytest.mark.obligations("O-declarations-18")
    def test_declared_sweep_index_sizes_count_what_is_stored(self, storage: Storage) -> None:
        if not isinstance(storage, SweepIndexInspector):
            return
        before = dict(storage.sweep_index_sizes())
        run = context(status="running")
        storage.contexts.save(run)
        storage.step_results.put(step_result(run.context_id, "charge", status="dispatched"))
        after = dict(storage.sweep_index_sizes())
        assert set(after) <= _SWEEP_INDEXES and all(
            isinstance(n, int) and n >= 0 for n in after.values()
        ), f"surface: sweep_index_sizes() names only {sorted(_SWEEP_INDEXES)}, counts >= 0"
        grown = {k: after[k] - before.get(k, 0) for k in ("runs", "steps") if k in after}
        assert all(n == 1 for n in grown.values()), teach(
            "surface",
            "sweep_index_sizes() (SweepIndexInspector) counts the entries of the sweep indexes: "
            f"one running run and one dispatched step add one each (grew by {grown})",
            "sizes read from another namespace, a stale counter, or a constant",
            'docs/protocol.md, "Inspection capabilities"',
        )


def _stats_reach(router: QueueInspector, **expected: int) -> QueueStats:
    """The router's stats once every expected count it reports (not ``None``) matches."""

    def matches() -> QueueStats | None:
        stats = router.queue_stats()
        reported = {k: getattr(stats, k) for k in expected if getattr(stats, k) is not None}
        return stats if all(reported[k] == expected[k] for k in reported) else None

    found = eventually(matches, timeout=_STATS_WAIT, interval=0.25)
    if found is None:
        pytest.fail(teach(
            "routers",
            f"queue_stats() (QueueInspector) counts this router's queue: expected {expected}, "
            f"got {router.queue_stats()}",
            "delayed jobs counted as ready (or not at all), counts of another namespace",
            'docs/protocol.md, "Inspection capabilities"',
        ))
    return found


#: Optional protocols a router may declare beyond ``Router``.
_ROUTER_PROTOCOLS: tuple[type, ...] = (
    DeadLetterAdmin, EnqueuesMany, QueueInspector, Pingable, BoundedNativeDelay
)


class DeclaredRouterCapabilitiesContract:
    """A router declares its optional protocols whole, and those it declares answer truly."""

    reactor_concern = "routers"

    @pytest.mark.obligations("O-declarations-15")
    def test_no_router_capability_is_half_declared(self, router: Router) -> None:
        half = [
            found for protocol in _ROUTER_PROTOCOLS
            if (found := _half_declared(router, "the router", protocol, Router)) is not None
        ]
        assert not half, teach(
            "routers",
            "an optional router protocol counts only when every member is there; "
            + "; ".join(half)
            + ": the engine, the CLI and this suite treat the router as without it (a gap)",
            "a capability half written, or a member misnamed: implement every member, or none",
            'docs/protocol.md, "Dead-letter administration"',
        )

    @pytest.mark.obligations("O-declarations-17")
    def test_a_declared_router_ping_answers(
        self, router: Router, reactor_router_url: str
    ) -> None:
        if not isinstance(router, Pingable):
            return
        router.ping()  # one round trip; raises RouterError only when the backend fails
        closed = open_router(reactor_router_url)
        closed.close()
        assert isinstance(closed, Pingable)
        _typed_or_working(closed.ping, RouterError, "routers", "ping() of a closed router")

    @pytest.mark.obligations("O-declarations-10")
    def test_a_declared_in_process_router_shows_nothing_to_another_process(
        self, reactor_router_url: str
    ) -> None:
        token = uid("inproc")
        router = open_router(reactor_router_url, token)
        try:
            if not in_process(router):
                return
            router.enqueue(_job())
            seen = _in_another_process(_RECEIVE_JOB, reactor_router_url, token, "")
        finally:
            router.close()
        assert seen == "absent", teach(
            "routers",
            "a router that declares keeps_data_in_process (InProcess) keeps its jobs in this "
            "process; a process opening the same URL and namespace received one queued here",
            "InProcess declared by a router whose queue lives in a server or a file",
            'docs/security.md, "Secure by default"',
        )

    @pytest.mark.obligations("O-declarations-19")
    def test_declared_queue_stats_count_the_queue(self, router: Router) -> None:
        if not isinstance(router, QueueInspector):
            return
        router.enqueue(_job())
        router.enqueue(_job(), delay_seconds=_FAR_DELAY)
        _stats_reach(router, ready=1, delayed=1, in_flight=0)
        received = eventually(lambda: router.receive(max_jobs=1, wait_seconds=1),
                              timeout=_NEAR_WAIT)
        assert received, "routers: a due job never came"
        _stats_reach(router, ready=0, delayed=1, in_flight=1)
        router.ack(received[0])
        _stats_reach(router, ready=0, delayed=1, in_flight=0)


def _wait_for(
    router: Router, job_id: str, timeout: float, delay: float = _NEAR_DELAY
) -> list[str]:
    """Receive (and ack) until ``job_id`` comes; every job id received on the way, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for delivery in router.receive(max_jobs=10, wait_seconds=1):
            seen.append(delivery.job.id)
            router.ack(delivery)
        if job_id in seen:
            return seen
    pytest.fail(f"routers: a job of a {delay:g} s delay never came within {timeout:g} s")


def _job() -> Job:
    """A run job of a fresh context."""
    return Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders"})


class DeclaredRouterDelaysContract:
    """A router declares no maximum delay: it honours every finite delay (docs/protocol.md,
    "Routers")."""

    reactor_concern = "routers"

    @pytest.mark.obligations("O-declarations-20")
    def test_a_router_never_caps_a_delay(self, router: Router) -> None:
        far, near = _job(), _job()
        router.enqueue(far, delay_seconds=_FAR_DELAY)
        router.enqueue(near, delay_seconds=_NEAR_DELAY)
        seen = _wait_for(router, near.id, _NEAR_WAIT)
        assert far.id not in seen, teach(
            "routers",
            f"a job enqueued with a delay of {_FAR_DELAY:g} s is not delivered before one of "
            f"{_NEAR_DELAY:g} s: a router honours any finite delay (it came first)",
            "a delay capped at the transport's maximum (SQS: 900 s) instead of re-deferred "
            "through Job.not_before",
            _DECLARED,
        )


def _came_whole(router: Router, job_id: str, started: float, what: str) -> None:
    """Wait for ``job_id`` and fail when it came before ``_LEGS_DELAY`` (less the slack) had
    passed since ``started`` (``time.monotonic()``)."""
    _wait_for(router, job_id, _NEAR_WAIT, _LEGS_DELAY)
    came_after = time.monotonic() - started
    assert came_after >= _LEGS_DELAY - _EARLY_SLACK, teach(
        "routers",
        f"{what} with a delay of {_LEGS_DELAY:g} s, its native delay limit lowered to "
        f"{_LOWERED_LIMIT:g} s (limit_native_delay), came after {came_after:.1f} s: a delay "
        "beyond the limit is honoured whole, by re-deferring the job until it is due",
        "a delay capped at the native limit (SQS: 900 s) instead of re-deferred, or "
        "limit_native_delay ignored by the path that sends it",
        _DECLARED,
    )


class DeclaredNativeDelayContract:
    """A router that declares a native delay limit (``BoundedNativeDelay``) still honours any
    longer delay whole: lowered to 1 s, a 4 s delay comes no earlier (docs/protocol.md,
    "Routers"; docs/contract-suite.md, "Declarations are checked")."""

    reactor_concern = "routers"

    @pytest.mark.obligations("O-declarations-21", "O-declarations-22")
    def test_a_delay_beyond_a_declared_native_limit_is_honoured_whole(
        self, router: Router
    ) -> None:
        if not isinstance(router, BoundedNativeDelay):
            return
        router.limit_native_delay(_LOWERED_LIMIT)
        assert router.native_delay_limit == _LOWERED_LIMIT, teach(
            "routers",
            f"native_delay_limit reads {router.native_delay_limit!r} after "
            f"limit_native_delay({_LOWERED_LIMIT:g})",
            "the limit not kept, or kept in other units",
            _DECLARED,
        )
        job = _job()
        started = time.monotonic()
        router.enqueue(job, delay_seconds=_LEGS_DELAY)
        _came_whole(router, job.id, started, "a job enqueued")

    @pytest.mark.obligations("O-declarations-23")
    def test_a_retry_beyond_a_declared_native_limit_is_honoured_whole(
        self, router: Router
    ) -> None:
        if not isinstance(router, BoundedNativeDelay):
            return
        router.limit_native_delay(_LOWERED_LIMIT)
        job = _job()
        router.enqueue(job)
        received = eventually(lambda: router.receive(max_jobs=1, wait_seconds=1),
                              timeout=_NEAR_WAIT)
        assert received and received[0].job.id == job.id, teach(
            "routers", "a job enqueued with no delay never came", "enqueue lost the job",
            'docs/protocol.md, "Routers"',
        )
        started = time.monotonic()
        router.retry(received[0], _LEGS_DELAY)
        _came_whole(router, job.id, started, "a job retried")


class TestDeclaredContextLimits(DeclaredContextLimitsContract):
    """The size-limit declaration against ``--reactor-storage``."""


class TestDeclaredStorageClock(DeclaredStorageClockContract):
    """The clock declarations against ``--reactor-storage``."""


class TestDeclaredFastPaths(DeclaredFastPathsContract):
    """The fast-path declarations against ``--reactor-storage``."""


class TestDeclaredInspection(DeclaredInspectionContract):
    """The inspection declarations against ``--reactor-storage``."""


class TestDeclaredRouterCapabilities(DeclaredRouterCapabilitiesContract):
    """The router's optional protocols against ``--reactor-router``."""


class TestDeclaredRouterDelays(DeclaredRouterDelaysContract):
    """The router's delays against ``--reactor-router``."""


class TestDeclaredNativeDelay(DeclaredNativeDelayContract):
    """A declared native delay limit against ``--reactor-router``."""
