"""Faults injected at the driver (docs/contract-suite.md, "Faults injected at the driver").

The probe names the adapter's driver clients (the optional
:class:`reactor_contract.probe.DriverProbe` capability); a
:class:`reactor_contract.driver_faults.FaultInjector` hooks them and fails request number N
of an operation, for every N up to the operation's last request, with each fault kind:

* a permanent error (``permission``, ``validation``) surfaces as ``StorageError`` /
  ``RouterError`` chained to the driver's exception, never as an answer;
* a transient one (``transient``, ``throttled``, ``applied_then_timeout``) surfaces as the
  typed error or the operation completes; either way a retry of the same operation then
  leaves the right state, nothing lost, nothing duplicated;
* closing a consumer, even on a failing driver, loses none of its unacknowledged jobs.

A probe without the capability (an in-process adapter: no driver) makes these tests skip, and
the ``driver_faults`` row shows a gap.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from reactor.errors import RouterError, StorageError
from reactor.model.records import ContextDelta, RateWindow
from reactor.ports.capabilities import in_process
from reactor.ports.router import Delivery, Job, Router
from reactor.ports.storage import Storage
from reactor_contract._support import (
    HOUR,
    SUITE_DOC,
    context,
    map_metadata,
    step_result,
    teach,
    uid,
)
from reactor_contract.driver_faults import (
    APPLIED_THEN_TIMEOUT,
    PERMISSION,
    THROTTLED,
    TRANSIENT,
    VALIDATION,
    FaultInjector,
)
from reactor_contract.optional_operations import appender
from reactor_contract.plugin import IN_PROCESS_NO_DRIVER, open_router
from reactor_contract.probe import DriverProbe, Probe, RouterProbe, load_router_probe

__all__ = [
    "NO_DRIVER",
    "DriverFaultsContract",
    "RouterDriverFaultsContract",
]

reactor_concern = "driver_faults"

#: The skip reason of a probe that names no driver client (a gap).
NO_DRIVER = (
    "capability: the probe names no driver client (no DriverProbe.driver_clients), so no "
    "fault can be injected at the driver"
)
_WHERE = f'{SUITE_DOC}, "Faults injected at the driver"'
_RULE = f'{SUITE_DOC}, "Rules: driver errors"'
#: The most requests one operation is expected to send; beyond it the walk stops.
_MAX_REQUESTS = 40
_PERMANENT = (PERMISSION, VALIDATION)
_TRANSIENT = (TRANSIENT, THROTTLED, APPLIED_THEN_TIMEOUT)
_VISIBILITY = 1.0


def _injector(probe: object, target: object) -> FaultInjector:
    """An injector on the clients ``probe`` names; skips for an in-process ``target`` (no
    driver: not applicable) and for a probe that names none (a gap)."""
    pairs = probe.driver_clients() if isinstance(probe, DriverProbe) else None
    if not pairs:
        pytest.skip(IN_PROCESS_NO_DRIVER if in_process(target) else NO_DRIVER)
    return FaultInjector(pairs)


def _chained(exc: BaseException, cause: BaseException) -> bool:
    """Whether ``cause`` is in ``exc``'s ``__cause__`` chain."""
    seen: set[int] = set()
    link: BaseException | None = exc.__cause__
    while link is not None and id(link) not in seen:
        if link is cause:
            return True
        seen.add(id(link))
        link = link.__cause__
    return False


@dataclass
class _Op:
    """One operation under faults: ``setup`` prepares fresh state (never under a fault),
    ``run`` is the operation, ``verify`` checks the state after the retry (given what the
    retry returned)."""

    setup: Callable[[Any], Any]
    run: Callable[[Any, Any], Any]
    verify: Callable[[Any, Any, Any], None]


def _walk(
    faults: FaultInjector, kind: str, op: _Op, target: Any
) -> Iterator[tuple[int, Any, Any, BaseException | None]]:
    """Fail request n of ``op`` with ``kind`` for n = 1, 2, ... until the operation sends
    fewer than n requests; yields ``(n, state, result, typed error or None)``. An exception
    that is neither the typed error nor the operation's own fails the test."""
    typed: type[Exception] = RouterError if isinstance(target, Router) else StorageError
    for n in range(1, _MAX_REQUESTS + 1):
        state = op.setup(target)
        faults.arm(n, kind)
        result: Any = None
        error: BaseException | None = None
        try:
            result = op.run(target, state)
        except typed as exc:
            error = exc
        except Exception as exc:
            if faults.fired:
                raise AssertionError(teach(
                    "driver_faults",
                    f"a {kind} driver error in request {n} ({faults.fired[0].what}) must "
                    f"surface as {typed.__name__}, got {type(exc).__name__}: {exc}",
                    "a driver call outside the adapter's try/except (a read path, a "
                    "pipeline, an index creation), or an except clause catching only some "
                    "of the driver's exception classes", _RULE,
                )) from exc
            raise
        finally:
            faults.disarm()
        fired = faults.fired
        if not fired:
            if error is not None:
                raise error
            assert n > 1, teach(
                "driver_faults",
                "the operation sent no request through the driver clients the probe names",
                "DriverProbe.driver_clients naming another client than the one the adapter "
                "uses (a copy, the probe's own connection)", _WHERE,
            )
            return  # the operation sent fewer than n requests: every one was failed once
        if error is not None:
            assert _chained(error, fired[0].error), teach(
                "driver_faults",
                f"the {typed.__name__} raised for a {kind} error in request {n} "
                f"({fired[0].what}) is chained to the driver's exception (__cause__)",
                "raising a new error inside the except clause without 'from exc'", _RULE,
            )
        yield n, state, result, error


def _permanent(faults: FaultInjector, op: _Op, target: Any, name: str) -> None:
    typed = "RouterError" if isinstance(target, Router) else "StorageError"
    for kind in _PERMANENT:
        for n, _, result, error in _walk(faults, kind, op, target):
            assert error is not None, teach(
                "driver_faults",
                f"{name}: a {kind} error in request {n} ({faults.fired[0].what}) must "
                f"surface as {typed}, but the operation answered {result!r}",
                "an except clause that reads any driver error as 'absent', 'lost the "
                "race' or 'nothing to do' (catch only the driver's specific "
                "condition-failed / duplicate-key error), or a best-effort request whose "
                "error is swallowed", _RULE,
            )


def _transient(faults: FaultInjector, op: _Op, target: Any, name: str) -> None:
    for kind in _TRANSIENT:
        for n, state, _, _ in _walk(faults, kind, op, target):
            what = faults.fired[0].what
            retried = op.run(target, state)
            try:
                op.verify(target, state, retried)
            except AssertionError as exc:
                raise AssertionError(teach(
                    "driver_faults",
                    f"{name}: after a {kind} error in request {n} ({what}) and a retry, "
                    f"the state is right, nothing lost or duplicated: {exc}",
                    "a multi-request write whose first requests stay applied when a later "
                    "one fails, so the retry writes them again (or finds them and stops), "
                    "or a write that is not idempotent under a retry", _WHERE,
                )) from exc


# -- storage operations ------------------------------------------------------------------------


def _ctx_setup(storage: Storage) -> Any:
    return context(uid("ctx"), status="running")


def _saved_with_base(storage: Storage) -> Any:
    from dataclasses import replace

    record = replace(context(uid("ctx"), status="running"), base=uid("base"))
    storage.contexts.save(record)
    return record


def _verify_saved(storage: Storage, record: Any, _: Any) -> None:
    loaded = storage.contexts.load(record.context_id)
    assert loaded is not None, "the saved context is missing"
    assert (loaded.document, loaded.status, loaded.base, loaded.segments) == (
        record.document, record.status, record.base, record.segments,
    ), f"stored {loaded!r}, saved {record!r}"


def _verify_loaded(storage: Storage, record: Any, loaded: Any) -> None:
    assert loaded is not None, "load answered None for a stored context"
    assert loaded.document == record.document, f"loaded {loaded!r}, saved {record!r}"


def _delta(record: Any) -> ContextDelta:
    return ContextDelta(record.context_id, record.base, 1, "completed", 1_700_000_100.0,
                        '{"seg":1}')


def _verify_appended(storage: Storage, record: Any, _: Any) -> None:
    loaded = storage.contexts.load(record.context_id)
    assert loaded is not None, "the context is missing after the append"
    assert loaded.base == record.base, f"base {loaded.base!r}, expected {record.base!r}"
    assert loaded.segments == ('{"seg":1}',), (
        f"segments {loaded.segments!r}: the segment must be stored exactly once"
    )
    assert loaded.status == "completed", f"status {loaded.status!r} after the append"
    follow = ContextDelta(record.context_id, record.base, 2, "completed", 1_700_000_200.0,
                          '{"seg":2}')
    assert appender(storage).append(follow) is True, "the chain refuses the next segment"
    again = storage.contexts.load(record.context_id)
    assert again is not None and again.segments == ('{"seg":1}', '{"seg":2}'), (
        f"segments {None if again is None else again.segments!r} after the next append"
    )


def _lock_setup(storage: Storage) -> Any:
    return uid("lock")


def _acquired(storage: Storage) -> Any:
    key = uid("lock")
    assert storage.locks.acquire(key, "owner-a", HOUR) > 0
    return key


def _verify_acquired(storage: Storage, key: str, token: Any) -> None:
    assert isinstance(token, int) and token > 0, f"the retried acquire answered {token!r}"
    info = storage.locks.info(key)
    assert info is not None and info.owner == "owner-a", f"lock info {info!r}"
    assert info.token == token, f"info().token {info.token} differs from the retry's {token}"
    assert storage.locks.acquire(key, "owner-b", HOUR) == 0, "another owner took a held lock"
    for _ in range(3):  # the acquisitions that went through, at most the two attempts
        if not storage.locks.release(key, "owner-a"):
            break
    later = storage.locks.acquire(key, "owner-b", HOUR)
    assert later > token, (
        f"after its owner released it, another owner got token {later} (held by {token})"
    )


def _verify_released(storage: Storage, key: str, _: Any) -> None:
    assert not storage.locks.held(key), "the lock is still held after the retried release"
    assert storage.locks.acquire(key, "owner-b", HOUR) > 0, "another owner cannot take it"


def _step_setup(storage: Storage) -> Any:
    return step_result(uid("ctx"), "charge", status="completed", outcome="ok",
                       data={"n": 1})


def _step_stored(storage: Storage) -> Any:
    record = _step_setup(storage)
    storage.step_results.put(record)
    return record


def _verify_step(storage: Storage, record: Any, got: Any) -> None:
    stored = storage.step_results.get(record.context_id, record.step_name)
    assert stored == record, f"stored {stored!r}, put {record!r}"
    if got is not None:
        assert got == record, f"get answered {got!r}"


def _claim_setup(storage: Storage) -> Any:
    return uid("idem"), uid("ctx")


def _verify_claim(storage: Storage, state: tuple[str, str], answer: Any) -> None:
    key, holder = state
    assert answer in (None, holder), (
        f"the retried claim answered {answer!r}: None (claimed now) or the caller's own id"
    )
    assert storage.claims.claim_idempotency_key("orders", key, uid("other")) == holder, (
        "another run's claim is not told the caller holds the key"
    )


def _verify_deleted(storage: Storage, record: Any, _: Any) -> None:
    assert storage.contexts.load(record.context_id) is None, "the deleted context is back"


def _verify_semaphore(storage: Storage, key: str, answer: Any) -> None:
    assert answer is True, f"the retried acquire answered {answer!r} (the holder keeps its slot)"
    state = storage.semaphores.state(key)
    holders = sorted(state.holders) if state is not None else []
    assert holders == ["holder-a"], f"holders {holders}: the holder must hold one slot"
    assert storage.semaphores.acquire(key, "holder-b", 2, HOUR), "the second slot is taken"
    assert not storage.semaphores.acquire(key, "holder-c", 2, HOUR), "a third slot was given"


STORAGE_OPS: dict[str, _Op] = {
    "contexts.save": _Op(
        _ctx_setup, lambda s, r: s.contexts.save(r), _verify_saved,
    ),
    "contexts.load": _Op(
        _saved_with_base, lambda s, r: s.contexts.load(r.context_id), _verify_loaded,
    ),
    "contexts.append": _Op(
        _saved_with_base, lambda s, r: appender(s).append(_delta(r)), _verify_appended,
    ),
    "locks.acquire": _Op(
        _lock_setup, lambda s, k: s.locks.acquire(k, "owner-a", HOUR), _verify_acquired,
    ),
    "locks.release": _Op(
        _acquired, lambda s, k: s.locks.release(k, "owner-a"), _verify_released,
    ),
    "step_results.put": _Op(
        _step_setup, lambda s, r: s.step_results.put(r), _verify_step,
    ),
    "step_results.get": _Op(
        _step_stored, lambda s, r: s.step_results.get(r.context_id, r.step_name), _verify_step,
    ),
    "claims.claim_idempotency_key": _Op(
        _claim_setup, lambda s, st: s.claims.claim_idempotency_key("orders", st[0], st[1]),
        _verify_claim,
    ),
    "contexts.delete": _Op(
        _saved_with_base, lambda s, r: s.contexts.delete(r.context_id), _verify_deleted,
    ),
    "semaphores.acquire": _Op(
        _lock_setup, lambda s, k: s.semaphores.acquire(k, "holder-a", 2, HOUR),
        _verify_semaphore,
    ),
}


def _unchecked(storage: Storage, state: Any, result: Any) -> None:
    """No retry check: the operation is walked for permanent errors only."""


#: More operations, walked for permanent errors only (each must surface as ``StorageError``).
STORAGE_PERMANENT_OPS: dict[str, _Op] = {
    **STORAGE_OPS,
    "contexts.scan": _Op(
        _saved_with_base, lambda s, r: s.contexts.scan(limit=10), _unchecked,
    ),
    "locks.extend": _Op(
        _acquired, lambda s, k: s.locks.extend(k, "owner-a", HOUR), _unchecked,
    ),
    "claims.claim_correlation_id": _Op(
        _claim_setup, lambda s, st: s.claims.claim_correlation_id(st[0], st[1]), _unchecked,
    ),
    "maps.init": _Op(lambda s: map_metadata(), lambda s, m: s.maps.init(m), _unchecked),
    "rate_limits.hit": _Op(
        _lock_setup, lambda s, k: s.rate_limits.hit(k, [RateWindow("hour", HOUR, 5)]),
        _unchecked,
    ),
    "periods.mark": _Op(_lock_setup, lambda s, k: s.periods.mark(k, ttl=HOUR), _unchecked),
}


@pytest.fixture
def storage_faults(storage: Storage, probe: Probe) -> Iterator[FaultInjector]:
    """The storage's driver clients under a :class:`FaultInjector` (skips without one)."""
    with _injector(probe, storage) as faults:
        storage.contexts.load(uid("warm"))  # lazy setup (a schema, a clock) is not the op
        yield faults


class DriverFaultsContract:
    """Storage operations under faults injected at the driver."""

    reactor_concern = "driver_faults"

    @pytest.mark.obligations("O-driver_faults-1")
    @pytest.mark.parametrize("name", sorted(STORAGE_PERMANENT_OPS))
    def test_a_permanent_driver_error_surfaces_as_storage_error(
        self, storage: Storage, storage_faults: FaultInjector, name: str
    ) -> None:
        _permanent(storage_faults, STORAGE_PERMANENT_OPS[name], storage, name)

    @pytest.mark.obligations("O-driver_faults-3", "O-driver_faults-4")
    @pytest.mark.parametrize("name", sorted(STORAGE_OPS))
    def test_a_transient_driver_error_then_a_retry_leaves_the_right_state(
        self, storage: Storage, storage_faults: FaultInjector, name: str
    ) -> None:
        _transient(storage_faults, STORAGE_OPS[name], storage, name)


# -- router operations -------------------------------------------------------------------------


def _job() -> Job:
    return Job(kind="run", payload={"context_id": uid("ctx"), "reactor": "orders"})


def _drain(router: Router, *, until: Callable[[list[Delivery]], bool], timeout: float
           ) -> list[Delivery]:
    """Receive (and ack) until ``until(everything received)`` or ``timeout`` seconds."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while not until(got) and time.monotonic() < deadline:
        batch = router.receive(max_jobs=10, wait_seconds=0.2)
        for delivery in batch:
            router.ack(delivery)
        got += batch
    return got


def _verify_delivered(router: Router, job: Job, _: Any) -> None:
    got = _drain(router, until=lambda g: any(d.job.id == job.id for d in g),
                 timeout=_VISIBILITY + 4)
    ours = [d for d in got if d.job.id == job.id]
    assert ours, f"the job {job.id} was lost: received {[d.job.id for d in got]}"
    for delivery in ours:
        assert dict(delivery.job.payload) == dict(job.payload), (
            f"a copy of the job carries {delivery.job.payload!r}"
        )


def _enqueued(router: Router) -> Job:
    job = _job()
    router.enqueue(job)
    return job


def _received(router: Router) -> tuple[Job, Delivery]:
    job = _enqueued(router)
    got = _drain_one(router, job)
    return job, got


def _drain_one(router: Router, job: Job) -> Delivery:
    deadline = time.monotonic() + _VISIBILITY + 4
    while time.monotonic() < deadline:
        for delivery in router.receive(max_jobs=1, wait_seconds=0.5):
            if delivery.job.id == job.id:
                return delivery
    raise AssertionError(f"the enqueued job {job.id} was never received")


def _receive(router: Router, job: Job) -> list[Delivery]:
    return router.receive(max_jobs=1, wait_seconds=0)


def _verify_received(router: Router, job: Job, _: Any) -> None:
    _verify_delivered(router, job, None)


def _verify_acked(router: Router, state: tuple[Job, Delivery], _: Any) -> None:
    # past the visibility window, receiving all along: a lease that survived comes back
    again = _drain(router, until=lambda g: False, timeout=_VISIBILITY + 1.5)
    assert not again, (
        f"an acknowledged job was delivered again: {[d.job.id for d in again]}"
    )


def _verify_retried(router: Router, state: tuple[Job, Delivery], _: Any) -> None:
    job, first = state
    got = _drain(router, until=lambda g: any(d.job.id == job.id for d in g),
                 timeout=_VISIBILITY + 4)
    ours = [d for d in got if d.job.id == job.id]
    assert ours, f"the retried job {job.id} was lost"
    assert all(d.delivery_count > first.delivery_count for d in ours), (
        f"delivery counts {[d.delivery_count for d in ours]} after a retry of delivery "
        f"{first.delivery_count}"
    )


def _verify_dead_lettered(router: Router, state: tuple[Job, Delivery], _: Any) -> None:
    job = state[0]
    def ours() -> list[Any]:
        return [d for d in router.dead_letters(limit=100) if job.id in d.body]

    # a queue-backed dead-letter listing (SQS) may miss a letter another listing holds leased
    # for a moment: list again until exactly one shows, for a few seconds
    letters = ours()
    deadline = time.monotonic() + 10
    while len(letters) != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        letters = ours()
    assert len(letters) == 1, (
        f"{len(letters)} dead letters of job {job.id} after a retried dead_letter (one expected)"
    )
    again = [d.job.id for d in _drain(router, until=lambda g: False,
                                      timeout=_VISIBILITY + 1.5)]
    assert job.id not in again, "a dead-lettered job was delivered again"


ROUTER_OPS: dict[str, _Op] = {
    "enqueue": _Op(lambda r: _job(), lambda r, j: r.enqueue(j), _verify_delivered),
    "receive": _Op(_enqueued, _receive, _verify_received),
    "ack": _Op(_received, lambda r, st: r.ack(st[1]), _verify_acked),
    "retry": _Op(_received, lambda r, st: r.retry(st[1], 0), _verify_retried),
    "dead_letter": _Op(_received, lambda r, st: r.dead_letter(st[1], "poison"),
                       _verify_dead_lettered),
}


#: More router operations, walked for permanent errors only.
ROUTER_PERMANENT_OPS: dict[str, _Op] = {
    **ROUTER_OPS,
    "extend": _Op(_received, lambda r, st: r.extend(st[1], 5), _unchecked),
}


@pytest.fixture
def router_faults(router: Router, router_probe: RouterProbe) -> Iterator[FaultInjector]:
    """The router's driver clients under a :class:`FaultInjector` (skips without one)."""
    with _injector(router_probe, router) as faults:
        yield faults


class RouterDriverFaultsContract:
    """Router operations and a consumer's shutdown under faults injected at the driver."""

    reactor_concern = "driver_faults"

    @pytest.mark.obligations("O-driver_faults-2")
    @pytest.mark.parametrize("name", sorted(ROUTER_PERMANENT_OPS))
    def test_a_permanent_driver_error_surfaces_as_router_error(
        self, router: Router, router_faults: FaultInjector, name: str
    ) -> None:
        _permanent(router_faults, ROUTER_PERMANENT_OPS[name], router, name)
        router.receive(max_jobs=10, wait_seconds=0)  # leave nothing leased behind

    @pytest.mark.obligations("O-driver_faults-5")
    @pytest.mark.parametrize("name", sorted(ROUTER_OPS))
    def test_a_transient_driver_error_then_a_retry_loses_no_job(
        self, router: Router, router_faults: FaultInjector, name: str
    ) -> None:
        _transient(router_faults, ROUTER_OPS[name], router, name)

    @pytest.mark.obligations("O-driver_faults-6")
    @pytest.mark.parametrize("fault", ["none", TRANSIENT, APPLIED_THEN_TIMEOUT])
    def test_closing_a_consumer_loses_none_of_its_unacknowledged_jobs(
        self, reactor_router_url: str, router_probe: RouterProbe, fault: str
    ) -> None:
        token = f"rc{uuid.uuid4().hex[:10]}"
        consumer = open_router(reactor_router_url, token)
        other = open_router(reactor_router_url, token)
        try:
            # skips when the probe names no driver
            _injector(load_router_probe(reactor_router_url, consumer), consumer)
            jobs = {_enqueued(consumer).id for _ in range(3)}
            held: set[str] = set()
            deadline = time.monotonic() + 10
            while held != jobs and time.monotonic() < deadline:
                held |= {d.job.id for d in consumer.receive(max_jobs=3, wait_seconds=0.5)}
            assert held == jobs, f"the consumer received {held}, expected {jobs}"
            probe = load_router_probe(reactor_router_url, consumer)
            with _injector(probe, consumer) as faults:
                if fault != "none":
                    faults.arm(1, fault, times=_MAX_REQUESTS)
                try:
                    consumer.close()
                except RouterError:
                    pass  # a failing close may say so, with the typed error
            again = _drain(other, until=lambda g: jobs <= {d.job.id for d in g},
                           timeout=_VISIBILITY + 6)
            missing = jobs - {d.job.id for d in again}
            assert not missing, teach(
                "driver_faults",
                f"closing a consumer (fault: {fault}) lost its unacknowledged jobs {missing}",
                "a close that acks or deletes what it holds, or drops a local prefetch "
                "buffer the server already counts as delivered for good", _WHERE,
            )
        finally:
            consumer.close()
            other.close()


class TestDriverFaults(DriverFaultsContract):
    pass


class TestRouterDriverFaults(RouterDriverFaultsContract):
    pass
