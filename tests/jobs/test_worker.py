"""``Worker``: dispatch by kind, poison jobs, retries, visibility heartbeat, graceful stop
(docs/workers.md, "Running workers")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Input, Reactor, StorageError, config, input, step
from reactor.config import Runtime
from reactor.jobs import handlers
from reactor.jobs.worker import Worker, default_backoff
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.status import RunStatus
from reactor.ports import Delivery, Job
from reactor.ports.payloads import RunPayload, SweepPayload, job

GATE = threading.Event()
ENTERED = threading.Event()
RAN: list[int] = []


class Echo(Reactor, name="jobs.echo"):
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def echo(inputs: Any, ctx: Any) -> int:
        RAN.append(inputs.n)
        return int(inputs.n)


class Blocking(Reactor, name="jobs.blocking"):
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def wait(inputs: Any, ctx: Any) -> int:
        ENTERED.set()
        assert GATE.wait(10), "the test never opened the gate"
        RAN.append(inputs.n)
        return int(inputs.n)


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    RAN.clear()
    GATE.clear()
    ENTERED.clear()
    yield
    GATE.set()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def runtime(clock: ManualClock) -> Iterator[Runtime]:
    rt = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock, visibility_timeout=30)
    )
    yield rt
    config.reset()


def _router(rt: Runtime) -> LocalRouter:
    assert isinstance(rt.router, LocalRouter)
    return rt.router


def test_poison_jobs_are_dead_lettered_and_the_worker_keeps_going(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    router = _router(runtime)
    router.enqueue(Job(kind="bogus", payload={}))
    router.enqueue(job(RunPayload(context_id="c1", reactor="nobody.registered.this")))
    router.enqueue(Job(kind="run", payload={"context_id": "", "reactor": 7}))
    router.enqueue_raw("{this is not json")
    handle = Echo.run(n=5)
    assert isinstance(handle, DispatchHandle)
    worker = Worker(runtime, liveness_wait=0.0)
    with caplog.at_level(logging.WARNING, logger="reactor.worker"):
        processed = worker.run_pending()
    assert processed == 4  # the undecodable message never reaches the worker
    assert RAN == [5]
    assert handle.wait(timeout=1).value == {"echo": 5}
    reasons = [d.reason for d in router.dead_letters()]
    assert len(reasons) == 4
    assert any("unknown job kind 'bogus'" in r for r in reasons)
    assert any("UnknownReactorError" in r and "nobody.registered.this" in r for r in reasons)
    assert any("invalid 'run' job payload" in r and "context_id" in r for r in reasons)
    assert any("undecodable message" in r for r in reasons)
    # the worker counts the jobs it dead-lettered; the router also lists the undecodable one
    assert worker.jobs_dead_lettered == 3 and worker.processed == 1
    logged = [r for r in caplog.records if "event=dead_letter" in r.message]
    assert len(logged) == 3  # once per poison job
    assert router.size() == 0


def test_poison_jobs_do_not_stop_worker_threads(runtime: Runtime) -> None:
    router = _router(runtime)
    router.enqueue(Job(kind="bogus", payload={}))
    router.enqueue(job(RunPayload(context_id="c1", reactor="nobody.registered.this")))
    worker = Worker(runtime, threads=2, poll_seconds=0.05, liveness_wait=0.0)
    worker.start()
    try:
        handle = Echo.run(n=9)
        assert isinstance(handle, DispatchHandle)
        assert handle.wait(timeout=10).value == {"echo": 9}
    finally:
        assert worker.stop(timeout=10)
    assert len(router.dead_letters()) == 2


def test_a_failing_handler_is_retried_with_backoff_then_dead_lettered(
    runtime: Runtime, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def broken(jc: handlers.JobContext, payload: Any) -> None:
        calls.append(jc.delivery.delivery_count if jc.delivery else -1)
        raise (StorageError if len(calls) == 1 else RuntimeError)("backend down")

    monkeypatch.setitem(handlers.HANDLERS, "sweep", broken)
    router = _router(runtime)
    router.enqueue(job(SweepPayload()))
    worker = Worker(runtime, max_deliveries=3, liveness_wait=0.0)
    assert worker.run_pending() == 1
    assert worker.run_pending() == 0  # retried after default_backoff(1) = 1 s
    clock.advance(default_backoff(1))
    assert worker.run_pending() == 1
    clock.advance(default_backoff(2))
    assert worker.run_pending() == 1
    assert calls == [1, 2, 3]
    [dead] = router.dead_letters()
    assert dead.reason == "handler failed on 3 deliveries: RuntimeError: backend down"
    assert worker.retried == 2 and router.size() == 0


def test_default_backoff_doubles_up_to_a_minute() -> None:
    assert [default_backoff(n) for n in (1, 2, 3, 8)] == [1.0, 2.0, 4.0, 60.0]


class ExtendRecorder(LocalRouter):
    # 3 s: extended every second, so an extend may come 2 s late on a loaded machine before the
    # delivery lapses (and the job would run again)
    def __init__(self) -> None:
        super().__init__(visibility_timeout=3.0)
        self.extended: list[float] = []

    def extend(self, delivery: Delivery, seconds: float) -> None:
        self.extended.append(seconds)
        super().extend(delivery, seconds)


def test_long_handlers_extend_their_visibility() -> None:
    router = ExtendRecorder()
    rt = config.configure(storage=MemoryStorage(), router=router)
    try:
        handle = Blocking.run(n=1)
        assert isinstance(handle, DispatchHandle)
        worker = Worker(rt, poll_seconds=0.05, liveness_wait=0.0)
        assert worker.visibility == 3.0
        worker.start()
        assert ENTERED.wait(10)
        deadline = threading.Event()
        for _ in range(1200):  # bounded: until two extends happened (every visibility / 3)
            if len(router.extended) >= 2:
                break
            deadline.wait(0.05)
        assert len(router.extended) >= 2 and set(router.extended) == {3.0}
        GATE.set()
        assert handle.wait(timeout=10).value == {"wait": 1}
        assert worker.stop(timeout=10)
        assert router.size() == 0  # acked once, never redelivered
        assert RAN == [1]
    finally:
        config.reset()


def test_stop_finishes_the_in_flight_job_and_takes_no_new_one() -> None:
    rt = config.configure(storage=MemoryStorage(), router=LocalRouter())
    try:
        first = Blocking.run(n=1)
        assert isinstance(first, DispatchHandle)
        worker = Worker(rt, poll_seconds=0.05, liveness_wait=0.0)
        worker.start()
        assert ENTERED.wait(10)
        stopped: list[bool] = []
        stopper = threading.Thread(target=lambda: stopped.append(worker.stop(timeout=10)))
        stopper.start()
        for _ in range(200):
            if worker.stopping:
                break
            threading.Event().wait(0.01)
        second = Echo.run(n=2)
        assert isinstance(second, DispatchHandle)
        assert worker.in_flight == 1 and stopped == []
        GATE.set()
        stopper.join(10)
        assert stopped == [True]
        assert first.status() is RunStatus.COMPLETED
        assert second.status() is RunStatus.RUNNING  # not taken after the stop
        assert RAN == [1]
    finally:
        config.reset()


def test_worker_imports_operator_modules(runtime: Runtime) -> None:
    worker = Worker(runtime, import_modules=["tests.kill.reactors"])
    worker.import_user_modules()
    from reactor import registry

    assert "kill.flow" in registry.names()
    with pytest.raises(ModuleNotFoundError):
        Worker(runtime, import_modules=["no_such_module_xyz"]).import_user_modules()


def test_worker_rejects_bad_settings(runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="threads"):
        Worker(runtime, threads=0)
    with pytest.raises(ValueError, match="max_deliveries"):
        Worker(runtime, max_deliveries=0)


def test_a_repeated_stop_signal_logs_worker_stopping_once(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import signal as signal_module

    from reactor.jobs import worker as worker_module

    handlers: dict[int, Any] = {}
    monkeypatch.setattr(worker_module.signal, "signal",
                        lambda signum, handler: handlers.__setitem__(signum, handler))
    worker = Worker(runtime, poll_seconds=0.01)

    def start() -> None:  # two SIGTERMs arrive while the worker runs
        handlers[signal_module.SIGTERM](signal_module.SIGTERM, None)
        handlers[signal_module.SIGTERM](signal_module.SIGTERM, None)

    monkeypatch.setattr(worker, "start", start)
    with caplog.at_level(logging.INFO, logger="reactor.worker"):
        assert worker.serve() == 0
    assert sum("event=worker_stopping" in r.message for r in caplog.records) == 1


def test_serve_gives_the_process_its_own_signal_handlers_back(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SIGTERM/SIGINT handlers ``serve`` installs last only while it serves: once it
    returns, the handlers the process had before are back (a Ctrl-C in the same process
    raises KeyboardInterrupt again instead of only setting a stopped worker's flag)."""
    import signal as signal_module

    mine = {sig: (lambda signum, frame: None) for sig in (signal_module.SIGTERM,
                                                           signal_module.SIGINT)}
    before = {sig: signal_module.signal(sig, handler) for sig, handler in mine.items()}
    try:
        worker = Worker(runtime, poll_seconds=0.01)
        seen: dict[int, Any] = {}

        def start() -> None:  # serving: reactor's handlers are installed; stop at once
            for sig in mine:
                seen[sig] = signal_module.getsignal(sig)
            signal_module.getsignal(signal_module.SIGTERM)(signal_module.SIGTERM, None)

        monkeypatch.setattr(worker, "start", start)
        assert worker.serve() == 0
        assert all(seen[sig] is not mine[sig] for sig in mine)
        assert {sig: signal_module.getsignal(sig) for sig in mine} == mine
    finally:
        for sig, handler in before.items():
            signal_module.signal(sig, handler)


def test_an_unreachable_router_is_retried_with_backoff_one_line_per_attempt(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker facing a dead backend does not spin or print a traceback every poll: it logs
    one line per failed receive and backs off 0.5, 1, 2, ... s (at most 30 s), then recovers."""
    from reactor.errors import RouterError
    from reactor.jobs import worker as worker_module

    calls: list[int] = []
    waits: list[float] = []
    worker = Worker(runtime, threads=1, poll_seconds=0.0)

    def receive(max_jobs: int, wait_seconds: float = 0.0) -> list[Any]:
        calls.append(1)
        if len(calls) <= 4:
            raise RouterError("connection refused")
        worker._stopping.set()
        return []

    class Stopping:
        def is_set(self) -> bool:
            return worker._stopping_event.is_set()

        def wait(self, seconds: float) -> bool:
            waits.append(seconds)
            return False

        def set(self) -> None:
            worker._stopping_event.set()

    worker._stopping_event = threading.Event()  # type: ignore[attr-defined]
    worker._stopping = Stopping()  # type: ignore[assignment]
    runtime.router.receive = receive  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="reactor.worker"):
        worker._loop()
    assert waits == [0.5, 1.0, 2.0, 4.0]
    failed = [r for r in caplog.records if "receive_failed" in r.getMessage()]
    assert len(failed) == 4 and all(r.exc_info is None for r in failed)
    assert any("receive_recovered after_attempts=4" in r.getMessage() for r in caplog.records)
    assert worker_module.receive_backoff(20) == worker_module.RECEIVE_BACKOFF_MAX
