"""Async slots: a worker keeps many ``async def`` unit bodies in flight without a thread each
(reactor/jobs/async_slots.py, reactor/jobs/worker.py; docs/workers.md, "Async slots").

Bodies wait on gates the test opens (an ``asyncio.Event`` on reactor's loop), so "N bodies
in flight at once" is observed, never hoped for. The every-backend tests run on memory and
Redis: the slot host changes how a thread waits, not what the storage or the router sees.
Time limits are real time (an async body's limit is enforced on its loop); everything else
the runtime waits for is on a test clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import (
    Background,
    DispatchHandle,
    Failure,
    Reactor,
    Retries,
    Step,
    Success,
    Timeouts,
    async_step,
    compose,
    config,
    step,
    with_lock,
)
from reactor.config import Runtime
from reactor.coordination import Lock
from reactor.engine.async_step import outcome_of
from reactor.errors import ConfigurationError
from reactor.jobs import async_slots
from reactor.jobs.slot_jobs import awaits_on_loop, runs_on_loop
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.keys import step_liveness_key
from reactor.model.records import StepResultRecord
from reactor.model.secrets import generate_key
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.ports.payloads import RunPayload, StepPayload, job
from reactor.ports.router import Delivery
from reactor.testing import TestClock
from tests.backends import configure_on

#: The backends these tests run on.
SLOT_BACKENDS = ("memory", "redis")
#: Seconds a test waits for what must happen (never reached when it works).
MEET = 30.0


class Gate:
    """Where the bodies of one test wait, on reactor's loop: counts the bodies in flight and
    the most ever in flight at once, and opens (all or one by one) from the test's thread."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.entered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: asyncio.Event | None = None
        self._one = asyncio.Semaphore(0)
        self._arrived = threading.Condition()

    async def hold(self) -> None:
        """Wait (in a body) until the test opens the gate or lets this body through."""
        if self._loop is None:  # every body runs on reactor's one loop
            self._loop = asyncio.get_running_loop()
            self._open = asyncio.Event()
        assert self._open is not None
        with self._arrived:
            self.inside += 1
            self.entered += 1
            self.most = max(self.most, self.inside)
            self._arrived.notify_all()
        try:
            opened = asyncio.ensure_future(self._open.wait())
            one = asyncio.ensure_future(self._one.acquire())
            await asyncio.wait((opened, one), return_when=asyncio.FIRST_COMPLETED)
            for waiter in (opened, one):
                if not waiter.done():
                    waiter.cancel()
        finally:
            with self._arrived:
                self.inside -= 1

    def wait_entered(self, n: int) -> None:
        """Block the test until ``n`` bodies entered in all."""
        with self._arrived:
            assert self._arrived.wait_for(lambda: self.entered >= n, MEET), (
                f"only {self.entered} of {n} bodies entered"
            )

    def open(self) -> None:
        """Let every body through, now and later."""
        assert self._loop is not None and self._open is not None
        self._loop.call_soon_threadsafe(self._open.set)

    def let_one(self) -> None:
        """Let one waiting body through."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._one.release)


@pytest.fixture(params=SLOT_BACKENDS)
def runtime(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on memory or Redis (a fresh namespace), on a test clock, with a secret key:
    a worker refuses to start while any registered reactor (another test module's, too) holds
    secrets it could not open (docs/security.md, "When a key is wrong or missing")."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="slots",
                       secret_keys=(generate_key("slots"),))
    config.reset()


def _units(reactor: type[Reactor], n: int) -> list[str]:
    ids = []
    for _ in range(n):
        out = reactor.run()
        assert isinstance(out, Success) and out.run_id is not None
        ids.append(out.run_id)
    return ids


def _record(runtime: Runtime, run_id: str) -> StepResultRecord:
    record = runtime.storage.step_results.get(run_id, "unit")
    assert record is not None
    return record


def _until(done: Callable[[], bool], what: str) -> None:
    """Poll ``done`` (a probe) until it holds."""
    deadline = time.monotonic() + MEET
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _drain(worker: Worker) -> None:
    assert worker.stop(timeout=MEET), "the worker did not drain"


# ------------------------------------------------------------------------ concurrency


def test_one_thread_keeps_fifty_async_bodies_in_flight_at_once(runtime: Runtime) -> None:
    gate = Gate()

    class Fifty(Reactor):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            await gate.hold()
            return "ok"

    ids = _units(Fifty, 50)
    before = threading.active_count()
    worker = Worker(runtime, threads=1, async_slots=50, poll_seconds=0.2, liveness_wait=0.0)
    worker.start()
    try:
        gate.wait_entered(50)
        assert gate.inside == 50 and worker.in_flight == 50
        # one handler thread and its slot host (plus, at most, reactor's loop and the
        # lease renewal threads): never a thread per body
        assert threading.active_count() - before < 10
        gate.open()
    finally:
        _drain(worker)
    assert worker.processed == 50
    for run_id in ids:
        record = _record(runtime, run_id)
        assert record.status == "completed" and outcome_of(record) == Success("ok")


def test_one_thread_keeps_thirty_runs_of_an_async_reactor_in_flight_at_once(
    runtime: Runtime,
) -> None:
    """A ``run`` job of a reactor whose every step body is ``async def`` goes to a slot: the
    whole run (its liveness lock, checkpoints, the next step, the rollback) suspends while a
    body awaits. Before, each such run held a handler thread: one thread, one run."""
    gate = Gate()
    undone: list[str] = []

    class Booking(Reactor):
        background = Background(all=True)

        @step()
        async def reserve(inputs: Any, ctx: Any) -> str:
            await gate.hold()
            return "seat"

        @reserve.undo
        async def release(result: Any, inputs: Any, ctx: Any) -> None:
            undone.append(ctx.run_id)

        @step(wait_for="reserve")
        async def pay(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(0)
            if ctx.run_id in failing:
                raise RuntimeError("card declined")
            return "paid"

    assert runs_on_loop(Booking.definition)
    handles = [Booking.run() for _ in range(30)]
    ids = [h.run_id for h in handles if isinstance(h, DispatchHandle)]
    assert len(ids) == 30
    failing = set(ids[:5])
    worker = Worker(runtime, threads=1, async_slots=30, poll_seconds=0.2, liveness_wait=0.0)
    worker.start()
    try:
        gate.wait_entered(30)  # thirty runs at their first step, on one handler thread
        assert gate.inside == 30
        gate.open()
        _until(lambda: all(Booking.find(i).status in TERMINAL_STATUSES for i in ids),
               "every run ended")
    finally:
        _drain(worker)
    statuses = {i: Booking.find(i).status for i in ids}
    assert all(statuses[i] is RunStatus.FAILED for i in failing)
    assert all(statuses[i] is RunStatus.COMPLETED for i in ids if i not in failing)
    assert sorted(undone) == sorted(failing)  # each failed run's reserve undone once


def test_only_runs_of_async_reactors_go_to_a_slot() -> None:
    class Mixed(Reactor, name="slots.mixed_run"):
        @step()
        async def a(inputs: Any, ctx: Any) -> str:
            return "a"

        @step(wait_for="a")
        def b(inputs: Any, ctx: Any) -> str:  # a plain body would hold the host's thread
            return "b"

    class Parallel(Reactor, name="slots.parallel_run"):
        max_concurrency = 2

        @step()
        async def a(inputs: Any, ctx: Any) -> str:
            return "a"

    class Child(Reactor, name="slots.child_run"):
        @step()
        async def c(inputs: Any, ctx: Any) -> str:
            return "c"

    class Parent(Reactor, name="slots.parent_run"):
        child = compose(Child)

    class PlainChild(Reactor, name="slots.plain_child_run"):
        @step()
        def c(inputs: Any, ctx: Any) -> str:
            return "c"

    class PlainParent(Reactor, name="slots.plain_parent_run"):
        child = compose(PlainChild)

    def run_job(name: str) -> Any:
        return job(RunPayload(context_id="r", reactor=name))

    assert awaits_on_loop(run_job("slots.parent_run"))
    assert not awaits_on_loop(run_job("slots.mixed_run"))
    assert not awaits_on_loop(run_job("slots.parallel_run"))
    assert not awaits_on_loop(run_job("slots.plain_parent_run"))
    assert not awaits_on_loop(run_job("slots.not_registered"))


def test_with_every_slot_taken_the_worker_receives_nothing_more(runtime: Runtime) -> None:
    gate = Gate()

    class Four(Reactor):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            await gate.hold()
            return "ok"

    ids = _units(Four, 4)
    worker = Worker(runtime, threads=1, async_slots=2, poll_seconds=0.2, liveness_wait=0.0)
    worker.start()
    try:
        gate.wait_entered(2)
        # the other two are still in the router: this test's own receive gets them
        router = runtime.router
        waiting: list[Delivery] = []
        for _ in range(2):
            waiting += router.receive(1, wait_seconds=1.0)
        assert len(waiting) == 2 and worker.in_flight == 2
        for delivery in waiting:
            router.retry(delivery, 0.0)
        gate.let_one()
        gate.wait_entered(3)  # one slot freed: one more received
        gate.open()
        _until(lambda: worker.processed == 4, "every unit processed")
    finally:
        _drain(worker)
    assert gate.most == 2
    assert all(_record(runtime, run_id).status == "completed" for run_id in ids)


def test_a_plain_unit_and_other_jobs_still_run_on_the_handler_thread(runtime: Runtime) -> None:
    threads: dict[str, str] = {}

    class Plain(Reactor):
        @async_step
        def unit(inputs: Any, ctx: Any) -> str:
            threads["plain"] = threading.current_thread().name
            return "plain"

    class Async(Reactor):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            return "async"

    plain, other = _units(Plain, 1)[0], _units(Async, 1)[0]
    worker = Worker(runtime, threads=1, async_slots=4, poll_seconds=0.2, liveness_wait=0.0)
    worker.start()
    try:
        _until(lambda: worker.processed == 2, "both units processed")
    finally:
        _drain(worker)
    assert threads["plain"] == "reactor-worker-1"
    assert outcome_of(_record(runtime, plain)) == Success("plain")
    assert outcome_of(_record(runtime, other)) == Success("async")


class ExtendRecorder(LocalRouter):
    """A local router (3 s visibility) that records each delivery's extensions."""

    def __init__(self) -> None:
        super().__init__(visibility_timeout=3.0)
        self.extended: dict[str, int] = {}

    def extend(self, delivery: Delivery, seconds: float) -> None:
        self.extended[delivery.job.id] = self.extended.get(delivery.job.id, 0) + 1
        super().extend(delivery, seconds)


def test_suspended_jobs_keep_their_visibility_and_liveness_lock() -> None:
    router = ExtendRecorder()
    runtime = config.configure(storage=MemoryStorage(), router=router, context_lock_ttl=1.5)
    gate = Gate()

    class Held(Reactor):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            await gate.hold()
            return "ok"

    try:
        ids = _units(Held, 3)
        worker = Worker(runtime, threads=1, async_slots=3, poll_seconds=0.2,
                        liveness_wait=0.0)
        worker.start()
        try:
            gate.wait_entered(3)
            # every delivery extended twice (each visibility / 3 = 1 s): past the 1.5 s TTL of
            # the units' liveness locks, which are still held (renewed every 0.5 s)
            _until(lambda: len(router.extended) == 3 and min(router.extended.values()) >= 2,
                   "each suspended delivery extended twice")
            for run_id in ids:
                other = Lock(runtime.storage.locks, step_liveness_key(run_id, "unit"),
                             owner="another worker", ttl=1.5, auto_extend=False)
                assert not other.try_acquire()
            gate.open()
            _until(lambda: worker.processed == 3, "the units processed")
        finally:
            _drain(worker)
        assert router.size() == 0  # acked once each, never redelivered
        assert all(outcome_of(_record(runtime, r)) == Success("ok") for r in ids)
    finally:
        config.reset()


def test_a_contended_unit_in_a_slot_parks_as_on_a_thread() -> None:
    clock = TestClock(time.time())
    storage = MemoryStorage(clock=clock)
    runtime = config.configure(storage=storage, router=LocalRouter(clock=clock), clock=clock,
                               lock_snooze_base_delay=1.0, lock_snooze_jitter=0)
    ran: list[str] = []

    class Locked(Reactor):
        @async_step(coordination=with_lock(key="slots-shared", auto_extend=False))
        async def unit(inputs: Any, ctx: Any) -> str:
            ran.append("body")
            return "done"

    try:
        blocker = Lock(storage.locks, "slots-shared", owner="other", auto_extend=False)
        assert blocker.try_acquire()
        run_id = _units(Locked, 1)[0]
        worker = Worker(runtime, threads=1, async_slots=4, poll_seconds=0.1,
                        liveness_wait=0.0)
        worker.start()
        try:
            _until(lambda: worker.processed == 1, "the unit's first delivery processed")
            parked = _record(runtime, run_id)
            assert parked.status == "dispatched" and ran == []
            assert parked.waiting == "slots-shared" and parked.contention_attempts == 1
            blocker.release()
            clock.advance(1.0)  # the redelivery is due
            _until(lambda: worker.processed == 2, "the redelivery processed")
        finally:
            _drain(worker)
        assert ran == ["body"]
        done = _record(runtime, run_id)
        assert outcome_of(done) == Success("done") and done.contention_attempts == 1
    finally:
        config.reset()


# ------------------------------------------------------------------ the same rules as a thread


def _outcome_in(runtime: Runtime, reactor: type[Reactor], slots: int) -> StepResultRecord:
    run_id = _units(reactor, 1)[0]
    worker = Worker(runtime, threads=1, async_slots=slots, poll_seconds=0.2,
                    liveness_wait=0.0)
    worker.start()
    try:
        _until(lambda: worker.processed == 1, "the unit processed")
    finally:
        _drain(worker)
    return _record(runtime, run_id)


def _same(threaded: StepResultRecord, slotted: StepResultRecord) -> Failure:
    """Both records failed the same way; the slot's ``Failure``."""
    a, b = outcome_of(threaded), outcome_of(slotted)
    assert isinstance(a, Failure) and isinstance(b, Failure)
    assert (a.exception_class, a.message, a.retryable) == (b.exception_class, b.message,
                                                          b.retryable)
    kept = ("attempts", "compensation")
    assert {k: threaded.data.get(k) for k in kept} == {k: slotted.data.get(k) for k in kept}
    return b


def test_a_failing_async_body_retries_then_compensates_as_on_a_thread(
    runtime: Runtime,
) -> None:
    seen: list[tuple[str, int]] = []

    class Charge(Reactor):
        @async_step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=0.5))
        async def unit(inputs: Any, ctx: Any) -> str:
            seen.append(("run", ctx.attempt))
            await asyncio.sleep(0)
            raise RuntimeError("gateway down")

        @unit.compensate
        async def _(error: Any, inputs: Any, ctx: Any) -> None:
            seen.append(("compensate", 0))

    threaded = _outcome_in(runtime, Charge, 0)
    assert seen == [("run", 1), ("run", 2), ("run", 3), ("compensate", 0)]
    seen.clear()
    slotted = _outcome_in(runtime, Charge, 8)
    assert seen == [("run", 1), ("run", 2), ("run", 3), ("compensate", 0)]
    failure = _same(threaded, slotted)
    assert failure.message == "gateway down"
    assert slotted.data["attempts"] == 3 and slotted.data["compensation"] == {
        "status": "completed"}


def test_an_async_body_past_its_time_limit_times_out_as_on_a_thread(runtime: Runtime) -> None:
    class Hang(Step):
        timeouts = Timeouts(per_attempt=0.2)

        async def run(self) -> str:
            await asyncio.sleep(3600)
            return "never"

    class Slow(Reactor):
        unit = async_step(Hang)

    threaded = _outcome_in(runtime, Slow, 0)
    failure = _same(threaded, _outcome_in(runtime, Slow, 8))
    assert failure.exception_class == "reactor.errors.StepTimeout"


def test_heartbeats_keep_an_async_body_in_a_slot_alive_past_its_heartbeat_limit(
    runtime: Runtime,
) -> None:
    class CopyObjects(Step):
        # a limit a loaded machine (two suites on 2 cores) keeps: a success must not hang on
        # a fraction of a second of real time
        timeouts = Timeouts(heartbeat=1.5)

        async def run(self) -> int:
            for n in range(20):  # 2 s: past its heartbeat limit, beating every 0.1 s
                self.context.heartbeat({"copied": n})
                await asyncio.sleep(0.1)
            return 20

    class Copy(Reactor):
        unit = async_step(CopyObjects)

    assert outcome_of(_outcome_in(runtime, Copy, 8)) == Success(20)


def test_a_retry_wait_hands_the_slot_thread_back() -> None:
    """On the system clock a unit's retry wait suspends it: another unit of the same thread
    completes during the wait (a blocking wait would hold the thread until the retry)."""
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter())
    try:
        failed = threading.Event()
        retried_at: list[float] = []
        gate = Gate()

        class Flaky(Reactor):
            @async_step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=1.0))
            async def unit(inputs: Any, ctx: Any) -> str:
                if ctx.attempt == 1:
                    await gate.hold()
                    failed.set()
                    raise RuntimeError("once")
                retried_at.append(time.time())
                return "second"

        class Quick(Reactor):
            @async_step
            async def unit(inputs: Any, ctx: Any) -> str:
                await asyncio.get_running_loop().run_in_executor(None, failed.wait, MEET)
                return "quick"

        flaky = _units(Flaky, 1)[0]
        worker = Worker(runtime, threads=1, async_slots=4, poll_seconds=0.2,
                        liveness_wait=0.0)
        worker.start()
        try:
            gate.wait_entered(1)  # the flaky unit's first attempt is in first
            quick = _units(Quick, 1)[0]
            _until(lambda: worker.in_flight == 2, "both units in flight")
            gate.open()
            _until(lambda: worker.processed == 2, "both units processed")
        finally:
            _drain(worker)
        done = _record(runtime, quick)
        assert outcome_of(done) == Success("quick")
        assert outcome_of(_record(runtime, flaky)) == Success("second")
        assert done.updated_at < retried_at[0]  # completed while the other one waited
    finally:
        config.reset()


# ------------------------------------------------------------------------------ stopping


def test_stop_waits_for_the_bodies_in_flight_and_takes_no_new_job(runtime: Runtime) -> None:
    gate = Gate()

    class Held(Reactor):
        @async_step
        async def unit(inputs: Any, ctx: Any) -> str:
            await gate.hold()
            return "ok"

    ids = _units(Held, 3)
    worker = Worker(runtime, threads=1, async_slots=8, poll_seconds=0.2, liveness_wait=0.0)
    worker.start()
    gate.wait_entered(3)
    assert not worker.stop(timeout=0.3)  # the bodies are held: the drain runs out
    late = _units(Held, 1)[0]  # enqueued after the stop: never received
    assert worker.in_flight == 3
    gate.open()
    _until(lambda: worker.in_flight == 0, "the held bodies to end")
    for run_id in ids:
        assert outcome_of(_record(runtime, run_id)) == Success("ok")
    assert worker.processed == 3
    assert _record(runtime, late).status == "dispatched"
    delivered = runtime.router.receive(1, wait_seconds=1.0)  # the late one is still queued
    assert [d.job.payload["root_context_id"] for d in delivered] == [late]


# ------------------------------------------------------------------------- what goes to a slot


class _Routed(Reactor, name="slots.routed"):
    @async_step
    async def slots_routed_unit(inputs: Any, ctx: Any) -> str:
        return "async"

    @async_step
    def slots_routed_plain(inputs: Any, ctx: Any) -> str:
        return "plain"


class _AsyncClass(Step):
    async def run(self) -> str:
        return "class"


class _RoutedClass(Reactor, name="slots.routed_class"):
    slots_routed_class = async_step(_AsyncClass)


def _step_job(step: str, *, reactor: str = "slots.routed", child: bool = False) -> Any:
    return job(StepPayload(root_context_id="root", reactor=reactor,
                           step_context_id="child" if child else "root", step_name=step))


def test_only_step_jobs_of_async_def_unit_bodies_go_to_a_slot() -> None:
    assert awaits_on_loop(_step_job("slots_routed_unit"))
    assert awaits_on_loop(_step_job("slots_routed_class", reactor="slots.routed_class"))
    # a composed child's unit: every registered async_step of that name is async def
    assert awaits_on_loop(_step_job("slots_routed_unit", child=True))
    assert not awaits_on_loop(_step_job("slots_routed_plain"))
    assert not awaits_on_loop(_step_job("missing"))
    assert not awaits_on_loop(_step_job("slots_routed_unit", reactor="slots.not_registered"))
    another_kind = dataclasses.replace(_step_job("slots_routed_unit"), kind="map_element")
    assert not awaits_on_loop(another_kind)


def test_async_slots_without_greenlet_refuse_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise ImportError("No module named 'greenlet'")

    monkeypatch.setattr(async_slots, "_greenlet_module", missing)
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter())
    try:
        with pytest.raises(ConfigurationError, match=r"async-slots"):
            Worker(runtime, async_slots=4)
        Worker(runtime)  # without slots the package is never needed
    finally:
        config.reset()


def test_worker_refuses_a_bad_async_slots_value() -> None:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter())
    try:
        for bad in (-1, True, 1.5):
            with pytest.raises(ValueError, match="async_slots"):
                Worker(runtime, async_slots=bad)  # type: ignore[arg-type]
        assert Worker(runtime).async_slots == 0  # off by default: one thread per job
    finally:
        config.reset()
