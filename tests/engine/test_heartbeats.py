"""Step heartbeats (docs/concepts.md, "Heartbeats"; reactor/model/heartbeats.py,
reactor/engine/invoke.py, reactor/engine/coroutines.py, reactor/engine/step_runner.py).

``ctx.heartbeat(details)`` says a long body is alive; a step declared
``Timeouts(heartbeat=...)`` fails its attempt with ``StepTimeout`` (``limit == "heartbeat"``)
when its body goes that long without one, and the next attempt reads the last details as
``ctx.last_heartbeat`` — in this execution, or after a worker handed the retry to the queue
(kept in ``retry_context``). A body that must go silent waits on an event nobody sets before
its heartbeat limit (a fraction of a second of real time): the timeout is certain.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import (
    Background,
    DispatchHandle,
    Input,
    Reactor,
    Retries,
    Step,
    StepTimeout,
    Timeouts,
    config,
    input,
    registry,
)
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.dashboard.run_detail import document_view
from reactor.dsl import step
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.engine.heartbeat_writes import HeartbeatWriter, write_interval
from reactor.errors import DefinitionError, StaleWriterError, StorageError
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.checkpoints import raw_document
from reactor.model.heartbeats import Heartbeats, LastHeartbeat
from reactor.model.masking import mask_document, mask_plain_secrets
from reactor.model.results import Failure, Success
from reactor.model.run_records import RetryCounters
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.model.step_context import StepContext
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on

#: The heartbeat limit of a body that must go silent (seconds of real time).
_BEAT = 0.1
#: How long a test waits for something that must happen (never reached when it works).
_MEET = 10.0
#: The heartbeat limit of a body that must stay alive, or of an attempt that must answer at
#: once: a loaded machine (two suites on 2 cores) may not schedule a thread for a second or
#: more, so a success must never hang on a tenth of a second of real time.
_ALIVE = 1.5


def test_a_heartbeat_limit_must_be_positive_finite_seconds() -> None:
    for bad in (0, -1.0, float("nan"), True, "5"):
        with pytest.raises(DefinitionError, match=r"Timeouts\.heartbeat"):
            Timeouts(heartbeat=bad)
    assert Timeouts(heartbeat=5).heartbeat == 5.0  # a heartbeat limit alone is a limit


def test_heartbeats_keep_a_long_plain_body_alive_past_its_heartbeat_limit() -> None:
    beats: list[int] = []

    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE))
        def copy(inputs: Any, ctx: Any) -> int:
            began = time.monotonic()
            n = 0
            while time.monotonic() - began < _ALIVE * 1.5:  # past its heartbeat limit
                n += 1
                ctx.heartbeat({"copied": n})
                beats.append(n)
                time.sleep(_BEAT / 4)
            return n

    out = Copy.run()
    assert isinstance(out, Success), out
    assert out.value["copy"] == beats[-1] > 1


def test_a_silent_plain_body_times_out_and_the_retry_resumes_from_its_last_heartbeat() -> None:
    hang = threading.Event()
    seen: list[Any] = []

    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE),
              retries=Retries(max_attempts=2, backoff="fixed", base_delay=0))
        def copy(inputs: Any, ctx: Any) -> str:
            last = ctx.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if ctx.attempt == 1:
                ctx.heartbeat({"offset": 40})
                hang.wait(_MEET)  # goes silent: no heartbeat for longer than _ALIVE
                return "late"
            return f"resumed at {last.details['offset']}"

    try:
        began = time.monotonic()
        out = Copy.run()
        took = time.monotonic() - began
    finally:
        hang.set()
    assert isinstance(out, Success), out
    assert out.value["copy"] == "resumed at 40"
    assert seen == [None, ({"offset": 40}, 1)]
    assert took < _MEET / 2  # the silence, not the hang, ended attempt 1


def test_the_heartbeat_timeout_is_a_step_timeout_naming_the_heartbeat() -> None:
    hang = threading.Event()

    class Silent(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT, per_attempt=_MEET))
        def call(inputs: Any, ctx: Any) -> None:
            hang.wait(_MEET)

    try:
        out = Silent.run()
    finally:
        hang.set()
    assert isinstance(out, Failure)
    assert isinstance(out.error, StepTimeout)
    assert (out.error.limit, out.error.seconds, out.error.attempt) == ("heartbeat", _BEAT, 1)
    assert "without a heartbeat" in out.message and out.is_retryable


def test_heartbeats_never_extend_the_per_attempt_limit() -> None:
    stop = threading.Event()

    class Chatty(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE, per_attempt=_BEAT * 3))
        def call(inputs: Any, ctx: Any) -> None:
            while not stop.wait(_BEAT / 5):
                ctx.heartbeat()

    try:
        out = Chatty.run()
    finally:
        stop.set()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "per_attempt"


def test_an_async_body_is_kept_alive_by_heartbeats_and_cancelled_when_silent() -> None:
    cancelled: list[str] = []

    class AsyncCopy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE))
        async def alive(inputs: Any, ctx: Any) -> str:
            for n in range(45):  # 45 x _BEAT/2: past its heartbeat limit
                ctx.heartbeat(n)
                await asyncio.sleep(_BEAT / 2)
            return "done"

        @step(wait_for=["alive"], timeouts=Timeouts(heartbeat=_BEAT))
        async def silent(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat("started")
            try:
                await asyncio.sleep(_MEET)
            except asyncio.CancelledError:
                cancelled.append("silent")
                raise
            return "late"

    out = AsyncCopy.run()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "heartbeat" and out.step_name == "silent"
    assert cancelled == ["silent"]
    assert AsyncCopy.find(out.run_id).results["alive"] == "done"  # type: ignore[arg-type]


def test_a_heartbeat_outside_a_run_body_does_nothing() -> None:
    undone: list[Any] = []

    class Order(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat("a")  # no heartbeat limit: kept for a retry, harmless
            return "a"

        @a.undo
        def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            ctx.heartbeat("undo")  # no heartbeats object: nothing happens
            undone.append(ctx.last_heartbeat)

        @step(wait_for=["a"])
        def b(inputs: Any, ctx: Any) -> None:
            raise RuntimeError("no")

    out = Order.run()
    assert isinstance(out, Failure)
    assert undone == [None]

    class Probe(Step):
        def run(self) -> str:
            self.context.heartbeat("outside the engine")
            return "ok"

    called = Probe.call({}, StepContext(run_id="r-1", reactor="probe", step="probe"))
    assert isinstance(called, Success) and called.value == "ok"


def test_the_heartbeat_record_is_thread_safe_and_dates_each_attempt() -> None:
    now = [100.0]
    beats = Heartbeats(LastHeartbeat("kept", 5.0, 1), monotonic=lambda: now[0],
                       wall=lambda: 1700000000.0)
    assert beats.start(2) == LastHeartbeat("kept", 5.0, 1)
    assert beats.due(10) == 110.0
    now[0] = 104.0
    beats.beat({"offset": 3})
    assert beats.due(10) == 114.0
    assert beats.last == LastHeartbeat({"offset": 3}, 1700000000.0, 2)


def test_kept_heartbeats_round_trip_and_bad_ones_are_refused() -> None:
    shape = {"attempts": {"copy": 1},
             "heartbeats": {"copy": {"details": {"offset": 40}, "at": 1700000000.5,
                                     "attempt": 1}}}
    counters = RetryCounters.from_stored(shape)
    assert counters.heartbeat_of("copy") == LastHeartbeat({"offset": 40}, 1700000000.5, 1)
    assert counters.to_stored() == shape
    assert counters.with_heartbeat("copy", None).to_stored() == {"attempts": {"copy": 1}}
    from reactor.errors import DeserializationError

    for bad in ({"heartbeats": [1]}, {"heartbeats": {"copy": 1}},
                {"heartbeats": {"copy": {"at": "x", "attempt": 1}}},
                {"heartbeats": {"copy": {"at": 1.0, "attempt": True}}}):
        with pytest.raises(DeserializationError, match="heartbeats"):
            RetryCounters.from_stored(bad)


# ----------------------------------------------------------------------------- in a worker


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[tuple[Runtime, TestClock]]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="heartbeats"), clock
    config.reset()


def test_a_retry_handed_to_the_queue_reads_the_last_heartbeat_on_every_backend(
    runtime_on: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = runtime_on
    seen: list[Any] = []

    class Export(Reactor):
        background = Background(all=True)

        @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=0.2))
        def export(inputs: Any, ctx: Any) -> str:
            last = ctx.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if ctx.attempt == 1:
                ctx.heartbeat({"page": 7})
                ctx.heartbeat({"page": 8, "unstorable": object()})  # kept without details
                ctx.heartbeat({"page": 9})
                raise RuntimeError("the export API dropped the connection")
            return f"resumed at page {last.details['page']}"

    handle = Export.run()
    assert isinstance(handle, DispatchHandle)
    env = make_env(runtime)
    kept: list[Any] = []

    def done() -> bool:
        stored = load_context(env, handle.run_id, open_secrets=False)
        assert stored is not None
        last = stored.kept_heartbeat("export")
        if last is not None and not kept:
            kept.append(last.details)
        return stored.status in TERMINAL_STATUSES

    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + 60
    while not done():
        worker.run_pending()
        clock.advance(0.2)
        assert time.monotonic() < deadline, "the run never ended"
        time.sleep(0.05)
    stored = load_context(env, handle.run_id, open_secrets=False)
    assert stored is not None and stored.status is RunStatus.COMPLETED
    assert stored.intermediate_results["export"] == "resumed at page 9"
    assert seen == [None, ({"page": 9}, 1)]
    assert kept == [{"page": 9}]  # what the hand-off stored
    assert stored.kept_heartbeat("export") is None  # dropped when the step ended


# ------------------------------------------------------------- stored while the attempt runs


def _stored_heartbeat(env: Any, run_id: str, step_name: str) -> LastHeartbeat | None:
    """The last heartbeat of ``step_name`` the store holds now (a reader's view)."""
    stored = load_context(env, run_id, open_secrets=False)
    return None if stored is None else stored.kept_heartbeat(step_name)


def _drain(runtime: Runtime, clock: TestClock, env: Any, run_id: str) -> Any:
    """Run the worker until run ``run_id`` ends; its stored context."""
    worker = Worker(runtime, liveness_wait=0.0)
    deadline = time.monotonic() + 60
    while True:
        stored = load_context(env, run_id, open_secrets=False)
        assert stored is not None
        if stored.status in TERMINAL_STATUSES:
            return stored
        assert time.monotonic() < deadline, "the run never ended"
        worker.run_pending()
        clock.advance(0.2)


def test_a_worker_stores_the_last_heartbeat_while_the_attempt_runs_on_every_backend(
    runtime_on: tuple[Runtime, TestClock],
) -> None:
    runtime, clock = runtime_on
    env = make_env(runtime)
    seen_in_store: list[tuple[Any, int]] = []

    class Copy(Reactor):
        background = Background(all=True)

        @step(timeouts=Timeouts(heartbeat=3))  # written at most once a second
        def copy(inputs: Any, ctx: Any) -> int:
            # The body beats on until the store shows one of its heartbeats (a probe of the
            # store, bounded: the write is due a second after the attempt began).
            run_id = ctx.run_id
            deadline = time.monotonic() + _MEET
            offset = 0
            while time.monotonic() < deadline:
                offset += 1
                ctx.heartbeat({"offset": offset})
                stored = _stored_heartbeat(env, run_id, "copy")
                if stored is not None:
                    seen_in_store.append((stored.details, stored.attempt))
                    return offset
                time.sleep(0.02)  # pacing of the probe only, not a wait for an outcome
            raise AssertionError("no heartbeat was stored while the attempt ran")

    handle = Copy.run()
    assert isinstance(handle, DispatchHandle)
    stored = _drain(runtime, clock, env, handle.run_id)
    assert stored.status is RunStatus.COMPLETED
    [(details, attempt)] = seen_in_store
    assert attempt == 1 and 1 <= details["offset"] < stored.intermediate_results["copy"]
    assert stored.kept_heartbeat("copy") is None  # dropped when the step ended


def test_a_stored_heartbeat_masks_the_runs_secrets_in_the_store_and_in_runs_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "tok_SECRET_4242"
    clock = TestClock(time.time())
    storage = MemoryStorage(clock=clock)
    runtime = config.configure(storage=storage, router=LocalRouter(clock=clock), clock=clock,
                               allow_plaintext_secrets=True)
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    env = make_env(runtime)
    shown: list[dict[str, Any]] = []
    registered: list[str] = []
    try:
        class Charge(Reactor):
            background = Background(all=True)
            card = Input(str, redact=True)

            @step(card=input("card"), timeouts=Timeouts(heartbeat=3))
            def charge(inputs: Any, ctx: Any) -> str:
                deadline = time.monotonic() + _MEET
                while time.monotonic() < deadline:
                    ctx.heartbeat({"card": inputs.card, "note": f"charging {inputs.card}",
                                   "page": 3})
                    if _stored_heartbeat(env, ctx.run_id, "charge") is not None:
                        out = CliRunner().invoke(app, ["runs", "show", ctx.run_id, "--json"])
                        assert out.exit_code == 0, out.output
                        shown.append(json.loads(out.output))
                        record = storage.contexts.load(ctx.run_id)
                        assert record is not None
                        masked = mask_document(raw_document(record))  # as the dashboard
                        page = document_view(storage, masked, ctx.run_id)
                        shown.append(page)
                        return "ok"
                    time.sleep(0.02)  # pacing of the probe only
                raise AssertionError("no heartbeat was stored while the attempt ran")

        # a reactor with secrets stays registered no longer than this test (a worker of a
        # later test without a secret key refuses to serve one)
        registered.append(Charge.reactor_name)
        handle = Charge.run(card=secret)
        assert isinstance(handle, DispatchHandle)
        stored = _drain(runtime, clock, env, handle.run_id)
        assert stored.status is RunStatus.COMPLETED
        for view in shown:  # reactor runs show --json, the dashboard's run page
            beat = view["heartbeats"]["charge"]
            assert beat["details"] == {"card": "[REDACTED]", "note": "charging [REDACTED]",
                                       "page": 3}
            assert beat["attempt"] == 1 and isinstance(beat["at"], float)
            assert secret not in json.dumps(view, default=str)
        assert len(shown) == 2
    finally:
        for name in registered:
            registry.unregister(name)
        config.reset()


def test_the_heartbeat_writer_coalesces_writes_and_stops_when_the_run_is_lost() -> None:
    assert write_interval(3) == 1.0 and write_interval(30) == 10.0 and write_interval(0.1) == 1.0
    now = [100.0]
    beats = Heartbeats(monotonic=lambda: now[0], wall=lambda: 5.0)
    beats.start(1)
    written: list[Any] = []
    fail: list[BaseException] = []

    def write(last: LastHeartbeat) -> None:
        if fail:
            raise fail.pop()
        written.append(last.details)

    writer = HeartbeatWriter("copy", beats, 1.0, write, monotonic=lambda: now[0])
    for n in range(1000):  # a tight loop of heartbeats within one interval: no write
        beats.beat({"n": n}, 1)
        writer.tick()
    assert written == [] and writer.next_at() == 101.0
    now[0] = 101.0
    writer.tick()
    writer.tick()
    assert written == [{"n": 999}]  # one write: the last heartbeat
    now[0] = 102.5
    writer.tick()
    assert written == [{"n": 999}]  # nothing new: nothing written
    beats.beat({"n": 1000}, 1)
    fail.append(StorageError("down"))
    now[0] = 104.0
    writer.tick()  # failed, logged, tried again at the next interval
    now[0] = 105.0
    writer.tick()
    assert written == [{"n": 999}, {"n": 1000}] and writer.writes == 2
    beats.beat({"n": 1001}, 1)
    fail.append(StaleWriterError("a newer holder saved the run"))
    now[0] = 106.0
    writer.tick()
    beats.beat({"n": 1002}, 1)
    now[0] = 200.0
    writer.tick()
    assert written == [{"n": 999}, {"n": 1000}] and writer.next_at() == float("inf")


def test_secret_values_in_heartbeat_details_are_masked_before_they_are_stored() -> None:
    details = {"card": "tok_1", "note": "using tok_1 now", "pin": 1234, "n": 1,
               "list": ["tok_1", 2, ("x", 1234)]}
    masked = mask_plain_secrets(details, ["tok_1", 1234, None, ""])
    assert masked == {"card": "[REDACTED]", "note": "using [REDACTED] now",
                      "pin": "[REDACTED]", "n": 1,
                      "list": ["[REDACTED]", 2, ("x", "[REDACTED]")]}
    plain = {"n": 1, "t": "x"}
    assert mask_plain_secrets(plain, ["tok_1"]) is plain  # nothing to mask: not copied
    assert mask_plain_secrets(plain, []) is plain


def test_an_async_body_in_a_worker_has_its_last_heartbeat_stored_while_it_runs(
    service_url: Callable[[str], str],
) -> None:
    clock = TestClock(time.time())
    runtime = configure_on("memory", service_url, clock, area="heartbeats")
    env = make_env(runtime)
    seen_in_store: list[Any] = []
    try:
        class Copy(Reactor):
            background = Background(all=True)

            @step(timeouts=Timeouts(heartbeat=3))
            async def copy(inputs: Any, ctx: Any) -> int:
                deadline = time.monotonic() + _MEET
                offset = 0
                while time.monotonic() < deadline:
                    offset += 1
                    ctx.heartbeat({"offset": offset})
                    stored = _stored_heartbeat(env, ctx.run_id, "copy")
                    if stored is not None:
                        seen_in_store.append(stored.details)
                        return offset
                    await asyncio.sleep(0.02)  # pacing of the probe only
                raise AssertionError("no heartbeat was stored while the attempt ran")

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        stored = _drain(runtime, clock, env, handle.run_id)
        assert stored.status is RunStatus.COMPLETED, stored.failure
        [details] = seen_in_store
        assert 1 <= details["offset"] < stored.intermediate_results["copy"]
    finally:
        config.reset()


@pytest.mark.parametrize("shape", ["deep", "cycle"])
def test_unstorable_details_of_a_run_with_secrets_are_dropped_not_crash_looped(
    shape: str,
) -> None:
    """Heartbeat details nested past the codec's MAX_DEPTH (or holding a cycle) in a run with
    a ``redact=True`` input: the secret masking walked them before the codec refused them and
    hit ``RecursionError`` at the worker's retry hand-off, so every delivery failed, the step
    body ran again on each one and the run stayed ``running`` behind dead letters (found by an
    outside attack). Now the details are dropped (logged) as for any unstorable details: the
    retry runs once and the run fails as its retries say."""
    from reactor.testing import TestEnvironment

    charges: list[int] = []
    details: Any
    if shape == "deep":
        details = []
        for _ in range(1200):
            details = [details]
    else:
        details = {}
        details["self"] = details

    with TestEnvironment() as env:
        class Card(Reactor, name=f"test_heartbeats.unstorable_{shape}"):
            background = Background(all=True)
            token = Input(str, redact=True)

            @step(timeouts=Timeouts(heartbeat=30),
                  retries=Retries(max_attempts=2, backoff="fixed", base_delay=1))
            def charge(inputs: Any, ctx: Any) -> None:
                charges.append(ctx.attempt)
                ctx.heartbeat({"cursor": details})
                raise ConnectionError("gateway down")

        try:
            handle = Card.run(token="s3cret")
            assert isinstance(handle, DispatchHandle)
            env.run_until_idle()
            env.sweep()
            env.run_until_idle()
            view = Card.find(handle.run_id)
            assert env.dead_letters() == []
        finally:
            registry.unregister(Card.reactor_name)
    assert view.status is RunStatus.FAILED
    assert charges == [1, 2]


def test_an_abandoned_attempt_s_calls_are_ignored_until_the_next_attempt_starts() -> None:
    """Once the engine gives an attempt up at its limit (``abandon``), that attempt's calls are
    ignored even before the next attempt starts (during the retry wait); the next attempt's
    calls count again."""
    beats = Heartbeats()
    beats.start(1)
    beats.beat({"offset": 5}, attempt=1)
    beats.abandon(1)
    beats.beat({"offset": 6}, attempt=1)  # the timed-out body runs on
    assert beats.last is not None and beats.last.details == {"offset": 5}
    beats.abandon(7)  # another attempt's number changes nothing
    assert beats.start(2) == beats.last
    beats.beat({"offset": 9}, attempt=2)
    assert beats.last.details == {"offset": 9} and beats.last.attempt == 2


class _ReleasingTheZombie(TestClock):
    """A test clock whose retry wait lets the timed-out body go on (``release``) and lasts
    until it has called ``ctx.heartbeat`` again (``zombie_beat``, bounded), so that call lands
    inside the wait, after the engine gave the attempt up."""

    def __init__(self, release: threading.Event, zombie_beat: threading.Event) -> None:
        super().__init__(time.time())
        self.release, self.zombie_beat = release, zombie_beat

    def sleep(self, seconds: float) -> None:
        self.release.set()
        assert self.zombie_beat.wait(10), "the timed-out body never called heartbeat"
        super().sleep(seconds)


def test_a_timed_out_plain_body_cannot_set_the_next_attempt_s_last_heartbeat() -> None:
    """A plain body past its heartbeat limit runs on; its heartbeat made during the retry
    wait used to become the next attempt's ``ctx.last_heartbeat`` (the attempt number had not
    moved on yet; found by an outside attack). The next attempt now reads the last heartbeat
    the abandoned attempt made in time."""
    release, zombie_beat = threading.Event(), threading.Event()
    seen: list[Any] = []
    config.configure(storage="memory://", router="inline://",
                     clock=_ReleasingTheZombie(release, zombie_beat))
    try:
        class Copy(Reactor, name="test_heartbeats.zombie"):
            @step(timeouts=Timeouts(heartbeat=_ALIVE),
                  retries=Retries(max_attempts=2, backoff="fixed", base_delay=1))
            def a(inputs: Any, ctx: Any) -> str:
                seen.append(ctx.last_heartbeat)
                if ctx.attempt == 1:
                    ctx.heartbeat({"who": "in time"})
                    assert release.wait(10)  # silent past the limit until the retry wait
                    ctx.heartbeat({"who": "zombie"})
                    zombie_beat.set()
                    return "late"
                return "second"

        try:
            out = Copy.run()
        finally:
            registry.unregister(Copy.reactor_name)
    finally:
        config.reset()
    assert out == Success({"a": "second"}, run_id=out.run_id)
    assert seen[0] is None
    assert seen[1] is not None and seen[1].details == {"who": "in time"}
