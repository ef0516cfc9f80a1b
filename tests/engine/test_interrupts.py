"""Interrupts: pausing a run for outside input and resuming it (docs/run-control.md,
"Interrupts").

Every backend (memory, Redis, mongomock, the MongoDB wire server, DynamoDB + SQS): two
concurrent resumes of one interrupt have exactly one winner; invalid payloads count attempts and
the last one fails the run, undoing the earlier steps once; a run paused here is resumed by its
correlation id from another process (a fresh runtime for the in-process backends); a resume
after the deadline fails and rolls back the run (lazy expiry, on an injected clock); the delayed
job does it without a resume (active expiry); the run sweeper leaves a paused run alone; a
resume can continue the run in a worker. In-process only: composed children, the definition
checks, hostile input (schemas, unknown correlation ids, bad arguments, non-JSON payloads in the
CLI), correlation-id conflicts, background runs that pause in a worker, idempotency keys, a
claimer that stopped before applying its claim, and the command line.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from reactor import (
    DefinitionError,
    DispatchHandle,
    Failure,
    Input,
    InterruptAlreadyResumedError,
    InterruptArgumentError,
    InterruptCorrelationError,
    InterruptExpiredError,
    InterruptNotFoundError,
    InterruptPayloadError,
    Paused,
    Reactor,
    RunNotFoundError,
    RunStateError,
    Success,
    config,
    element,
    input,
    interrupt,
    map_step,
    result,
    step,
)
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.interrupt_claim import InterruptClaim
from reactor.model.keys import run_liveness_key
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, backend_urls
from tests.engine.interrupt_reactors import (
    ActiveRefund,
    Approval,
    Audit,
    QueuedRefund,
    Refund,
    TimedRefund,
    events,
)

ROOT = Path(__file__).resolve().parents[2]
OK = {"approver": "ann", "approved": True}


# ------------------------------------------------------------------------------ backends


class Backend:
    """One configured backend: its runtime, its URLs (``None`` for in-process objects), and
    the clock the runtime waits and measures deadlines on."""

    def __init__(self, name: str, runtime: Runtime, storage_url: str | None,
                 router_url: str | None, clock: TestClock) -> None:
        self.name = name
        self.runtime = runtime
        self.storage_url = storage_url
        self.router_url = router_url
        self.clock = clock

    @property
    def in_process(self) -> bool:
        """Whether another process cannot see this backend's state."""
        return self.storage_url is None or self.storage_url.startswith("mongomock://")

    def worker(self) -> Worker:
        """A worker over this runtime that never waits for a liveness lock."""
        return Worker(self.runtime, liveness_wait=0.0)

    def drain_jobs(self, count: int, seconds: float = 30.0) -> None:
        """Run due jobs until ``count`` jobs ran, for at most ``seconds`` of real time."""
        ran = [0]

        def enough() -> bool:
            ran[0] += worker.run_pending()
            return ran[0] >= count

        worker = self.worker()
        deadline = time.monotonic() + seconds
        while not enough():
            assert time.monotonic() < deadline, f"only {ran[0]} of {count} jobs ran"
            time.sleep(0.05)

    def drain_until(self, done: Callable[[], bool], seconds: float = 30.0) -> None:
        """Run due jobs until ``done()``, for at most ``seconds`` of real time (a remote
        router's delays are real time; nothing is slept on a test's hope)."""
        worker = self.worker()
        deadline = time.monotonic() + seconds
        while not done():
            worker.run_pending()
            if done():
                return
            assert time.monotonic() < deadline, "the expected job never ran"
            time.sleep(0.05)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    key = generate_key()
    monkeypatch.setenv(ENV_VAR, key)
    return key


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], keys: str
) -> Iterator[Backend]:
    clock = TestClock(time.time())  # interrupt deadlines are measured on the runtime clock
    name = request.param
    if name == "memory":
        runtime = config.configure(storage=MemoryStorage(clock=clock),
                                   router=LocalRouter(clock=clock), clock=clock)
        urls: tuple[str | None, str | None] = (None, None)
    else:
        storage_url, router_url = backend_urls(
            name, service_url, f"ir{uuid.uuid4().hex[:10]}", area="interrupts"
        )
        runtime = config.configure(storage=storage_url, router=router_url, clock=clock)
        urls = (storage_url, router_url)
    events.clear()
    yield Backend(name, runtime, urls[0], urls[1], clock)
    config.reset()


@pytest.fixture
def memory(keys: str) -> Iterator[Backend]:
    clock = TestClock(time.time())
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock), clock=clock)
    events.clear()
    yield Backend("memory", runtime, None, None, clock)
    config.reset()


def _paused(outcome: Any) -> Paused:
    assert isinstance(outcome, Paused), outcome
    assert outcome.run_id
    return outcome


# ------------------------------------------------------------------------------ every backend


def test_reaching_an_interrupt_pauses_the_run_and_releases_its_lock(backend: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    assert not paused.success and not paused.failed and paused.paused
    assert paused.status == "paused"
    assert (paused.step, paused.correlation_id, paused.max_attempts) == (
        "approval", "refund:o-1", 3,
    )
    assert paused.timeout is None and paused.deadline is None
    view = Refund.find(paused.run_id or "")
    assert view.status is RunStatus.PAUSED
    assert view.interrupt is not None and view.interrupt.correlation_id == "refund:o-1"
    assert view.interrupt.attempts == 0 and view.interrupt.step == "approval"
    assert "approval" not in view.results and events == ["reserve:o-1"]
    assert not backend.runtime.storage.locks.held(run_liveness_key(paused.run_id or ""))
    with pytest.raises(RunStateError):  # a paused run is not finished: undo refuses it
        Refund.undo(paused.run_id or "")


def test_two_concurrent_resumes_have_exactly_one_winner(backend: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    outcomes: list[Any] = []
    barrier = threading.Barrier(2)

    def resume(approver: str) -> None:
        barrier.wait()
        try:
            outcomes.append(Refund.resume(
                paused.run_id, payload={"approver": approver, "approved": True}
            ))
        except BaseException as exc:  # reported below
            outcomes.append(exc)

    threads = [threading.Thread(target=resume, args=(who,)) for who in ("ann", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    wins = [o for o in outcomes if isinstance(o, Success)]
    losses = [o for o in outcomes if isinstance(o, InterruptAlreadyResumedError)]
    assert len(wins) == 1 and len(losses) == 1, outcomes
    winner = wins[0].value.rsplit(" ", 1)[-1]
    assert events == ["reserve:o-1", f"pay:o-1:{winner}"]  # pay ran once, with the winner's
    assert losses[0].run_id == paused.run_id and losses[0].step == "approval"
    assert Refund.find(paused.run_id or "").status is RunStatus.COMPLETED


def test_invalid_payloads_count_attempts_then_fail_the_run_with_one_rollback(
    backend: Backend,
) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    run_id = paused.run_id or ""
    for attempt in (1, 2):
        with pytest.raises(InterruptPayloadError, match="approver") as info:
            Refund.resume(run_id, payload={"approver": "", "approved": "maybe"})
        error = info.value
        assert set(error.field_errors) == {"approver", "approved"}
        assert (error.attempts, error.max_attempts, error.exhausted) == (attempt, 3, False)
        assert error.failure is None
        view = Refund.find(run_id)
        assert view.status is RunStatus.PAUSED
        assert view.interrupt is not None and view.interrupt.attempts == attempt
    with pytest.raises(InterruptPayloadError) as info:
        Refund.resume(run_id, payload={"approved": True})
    last = info.value
    assert last.exhausted and last.attempts == 3 and set(last.field_errors) == {"approver"}
    assert isinstance(last.failure, Failure) and last.failure.step_name == "approval"
    view = Refund.find(run_id)
    assert view.status is RunStatus.FAILED and view.failure is not None
    assert view.failure.exception_class == "reactor.errors.InterruptPayloadError"
    assert "no attempts left" in view.failure.message
    assert view.failure.validation_errors == {"approver": ["Field required"]}
    assert events == ["reserve:o-1", "unreserve:o-1"]  # undone exactly once, pay never ran
    with pytest.raises(InterruptAlreadyResumedError):
        Refund.resume(run_id, payload=OK)
    assert events == ["reserve:o-1", "unreserve:o-1"]


def test_a_run_is_resumed_by_correlation_id_from_another_process(backend: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-7"))
    if backend.in_process:  # a fresh runtime on the same stored state
        fresh = config.configure(storage=backend.runtime.storage, router=LocalRouter())
        outcome = Refund.resume(correlation_id="refund:o-7", payload=OK, runtime=fresh)
        assert isinstance(outcome, Success) and outcome.run_id == paused.run_id
        assert outcome.value == "refunded o-7 by ann"
    else:
        script = (
            "import reactor\n"
            "from tests.engine.interrupt_reactors import Refund, events\n"
            f"reactor.configure(storage={backend.storage_url!r}, router={backend.router_url!r})\n"
            "outcome = Refund.resume(correlation_id='refund:o-7', "
            "payload={'approver': 'ann', 'approved': True})\n"
            "print(type(outcome).__name__, outcome.run_id, outcome.value, events)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, check=False, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split(" ", 2)[:2] == ["Success", paused.run_id]
        assert "refunded o-7 by ann ['pay:o-7:ann']" in done.stdout  # ran there, not here
    view = Refund.find(paused.run_id or "")
    assert view.status is RunStatus.COMPLETED and view.results["pay"] == "refunded o-7 by ann"
    assert view.interrupt is None
    # the correlation id was released: it names nothing now
    with pytest.raises(InterruptNotFoundError) as info:
        Refund.resume(correlation_id="refund:o-7", payload=OK)
    assert info.value.field == "correlation_id"


def test_a_resume_after_the_deadline_fails_and_rolls_back_the_run(backend: Backend) -> None:
    paused = _paused(TimedRefund.run(order_id="o-1"))
    assert paused.timeout == 60 and paused.expiry == "lazy"
    assert paused.deadline == pytest.approx(backend.clock.now() + 60)
    backend.clock.advance(60.5)
    with pytest.raises(InterruptExpiredError, match="expired") as info:
        TimedRefund.resume(paused.run_id, payload=OK)
    error = info.value
    assert error.deadline == paused.deadline and error.step == "approval"
    assert isinstance(error.failure, Failure)
    view = TimedRefund.find(paused.run_id or "")
    assert view.status is RunStatus.FAILED and view.failure is not None
    assert view.failure.exception_class == "reactor.errors.InterruptExpiredError"
    assert events == ["reserve:o-1", "unreserve:o-1"]
    with pytest.raises(InterruptAlreadyResumedError):
        TimedRefund.resume(paused.run_id, payload=OK)


def test_a_resume_before_the_deadline_succeeds(backend: Backend) -> None:
    paused = _paused(TimedRefund.run(order_id="o-2"))
    backend.clock.advance(59)
    outcome = TimedRefund.resume(paused.run_id, payload=OK)
    assert isinstance(outcome, Success) and outcome.value == "refunded o-2 by ann"


def test_the_active_expiry_job_fails_a_run_still_paused_at_the_deadline(
    backend: Backend,
) -> None:
    paused = _paused(ActiveRefund.run(order_id="o-1"))
    run_id = paused.run_id or ""
    assert paused.expiry == "active"
    backend.worker().run_pending()  # not due yet: the run waits
    assert ActiveRefund.find(run_id).status is RunStatus.PAUSED
    backend.clock.advance(1.5)
    backend.drain_until(lambda: ActiveRefund.find(run_id).status is RunStatus.FAILED)
    view = ActiveRefund.find(run_id)
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.InterruptExpiredError"
    assert events == ["reserve:o-1", "unreserve:o-1"]
    with pytest.raises(InterruptAlreadyResumedError):
        ActiveRefund.resume(run_id, payload=OK)


def test_the_active_expiry_job_leaves_a_resumed_run_alone(backend: Backend) -> None:
    paused = _paused(ActiveRefund.run(order_id="o-2"))
    assert ActiveRefund.resume(paused.run_id, payload=OK).success
    backend.clock.advance(1.5)
    backend.drain_jobs(1)  # the interrupt_timeout job (remote routers delay it in real time)
    assert ActiveRefund.find(paused.run_id or "").status is RunStatus.COMPLETED
    assert events == ["reserve:o-2", "pay:o-2:ann"]


def test_the_run_sweeper_leaves_a_paused_run_alone(backend: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    run_id = paused.run_id or ""
    assert not backend.runtime.storage.locks.held(run_liveness_key(run_id))
    counts = run_sweeps(backend.runtime)
    assert counts.runs.redispatched == 0
    backend.worker().run_pending()
    assert Refund.find(run_id).status is RunStatus.PAUSED
    assert events == ["reserve:o-1"]
    assert Refund.resume(run_id, payload=OK).success


def test_a_resume_can_continue_the_run_in_a_worker(backend: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    handle = Refund.resume(paused.run_id, payload=OK, resume="background")
    assert isinstance(handle, DispatchHandle) and handle.run_id == paused.run_id
    assert events == ["reserve:o-1"]  # nothing ran in the caller
    backend.drain_until(
        lambda: Refund.find(paused.run_id or "").status is RunStatus.COMPLETED
    )
    outcome = handle.wait(10)
    assert isinstance(outcome, Success) and outcome.value == "refunded o-1 by ann"
    assert events == ["reserve:o-1", "pay:o-1:ann"]


# ------------------------------------------------------------------------------ composed children


def test_an_interrupt_in_a_composed_child_pauses_the_root(memory: Backend) -> None:
    paused = _paused(Audit.run(order_id="o-1"))
    assert paused.step == "refund.approval" and paused.correlation_id == "refund:o-1"
    view = Audit.find(paused.run_id or "")
    assert view.status is RunStatus.PAUSED
    assert view.children["refund"].status is RunStatus.PAUSED
    with pytest.raises(InterruptNotFoundError) as info:
        Audit.resume(paused.run_id, payload=OK, step="approval")
    assert info.value.field == "step" and "refund.approval" in str(info.value)
    outcome = Audit.resume(paused.run_id, payload=OK, step="refund.approval")
    assert isinstance(outcome, Success)
    assert outcome.value["refund"] == "refunded o-1 by ann"
    assert events == ["open:o-1", "reserve:o-1", "pay:o-1:ann"]
    view = Audit.find(paused.run_id or "")
    assert view.status is RunStatus.COMPLETED
    assert view.children["refund"].results["approval"] == Approval(**OK)


def test_a_failed_interrupt_in_a_child_rolls_back_the_child_then_the_parent(
    memory: Backend,
) -> None:
    paused = _paused(Audit.run(order_id="o-2"))
    for _ in range(3):
        with pytest.raises(InterruptPayloadError):
            Audit.resume(correlation_id="refund:o-2", payload=[])
    view = Audit.find(paused.run_id or "")
    assert view.status is RunStatus.FAILED and view.failure is not None
    assert view.failure.step_name == "refund"  # the compose step (docs/concepts.md)
    assert view.children["refund"].status is RunStatus.FAILED
    assert events == ["open:o-2", "reserve:o-2", "unreserve:o-2", "close:o-2"]


# ------------------------------------------------------------------------------ definitions


class _Element(Reactor, name="tests.interrupts.element"):
    item = Input(str)
    wait = interrupt()


def test_a_map_element_cannot_pause() -> None:
    with pytest.raises(DefinitionError, match="map element cannot pause"):
        type("Mapper", (Reactor,), {
            "__module__": __name__, "items": Input(list),
            "each": map_step(_Element, source=input("items"), args={"item": element("each")}),
        })


@pytest.mark.parametrize(("options", "message"), [
    ({"schema": dict}, "pydantic model class"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"),
    ({"timeout": -1}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"expiry": "active"}, "needs a timeout"),
    ({"timeout": 5, "expiry": "eager"}, "'lazy' or 'active'"),
    ({"correlation_id": 42}, "correlation_id"),
])
def test_bad_interrupt_options_are_definition_errors(options: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        interrupt(**options)


def test_returns_may_name_an_interrupt_and_a_plain_payload_is_any_storable_value(
    memory: Backend,
) -> None:
    class Ask(Reactor, name="tests.interrupts.ask"):
        returns = "answer"
        answer = interrupt()

    paused = _paused(Ask.run())
    assert paused.correlation_id is None and paused.max_attempts == 3
    with pytest.raises(InterruptPayloadError, match="cannot be stored") as info:
        Ask.resume(paused.run_id, payload=object())
    assert list(info.value.field_errors) == ["payload"]
    outcome = Ask.resume(paused.run_id, payload=[1, "two", {"three": 3}])
    assert isinstance(outcome, Success) and outcome.value == [1, "two", {"three": 3}]


def test_a_step_cannot_pause_by_returning_paused(memory: Backend) -> None:
    class Sneaky(Reactor, name="tests.interrupts.sneaky"):
        @step()
        def fake(inputs: Any, ctx: Any) -> Paused:
            return Paused("fake")

    outcome = Sneaky.run()
    assert isinstance(outcome, Failure) and "declare an interrupt" in outcome.message


# ------------------------------------------------------------------------------ hostile input


def test_resume_refuses_bad_arguments_unknown_ids_and_finished_runs(memory: Backend) -> None:
    with pytest.raises(InterruptArgumentError) as arg:
        Refund.resume(payload=OK)
    assert arg.value.field == "run_id"
    with pytest.raises(InterruptArgumentError):
        Refund.resume("x", correlation_id="y", payload=OK)
    with pytest.raises(InterruptArgumentError) as arg:
        Refund.resume("x", payload=OK, resume="later")  # type: ignore[arg-type]
    assert arg.value.field == "resume"
    with pytest.raises(InterruptArgumentError) as arg:
        Refund.resume("x", payload=OK, step=" ")
    assert arg.value.field == "step"
    with pytest.raises(InterruptNotFoundError) as missing:
        Refund.resume(correlation_id="refund:nobody", payload=OK)
    assert missing.value.field == "correlation_id"
    with pytest.raises(RunNotFoundError):
        Refund.resume("no-such-run", payload=OK)
    paused = _paused(Refund.run(order_id="o-1"))
    with pytest.raises(RunNotFoundError):  # a run of another reactor
        TimedRefund.resume(paused.run_id, payload=OK)
    with pytest.raises(InterruptNotFoundError):  # its correlation id, seen from another reactor
        TimedRefund.resume(correlation_id="refund:o-1", payload=OK)
    assert Reactor.resume(paused.run_id, payload=OK).success  # the base class: any reactor
    assert Audit.definition.interrupt_paths() == ("refund.approval",)
    plain = _plain_run()  # a finished run that never paused
    with pytest.raises(InterruptNotFoundError, match="not paused") as info:
        Reactor.resume(plain, payload=OK)
    assert info.value.status == "completed"


def _plain_run() -> str:
    class Plain(Reactor, name="tests.interrupts.plain"):
        @step()
        def only(inputs: Any, ctx: Any) -> int:
            return 1

    outcome = Plain.run()
    assert outcome.success and outcome.run_id
    return outcome.run_id


def test_a_correlation_id_held_by_a_paused_run_fails_another_runs_interrupt(
    memory: Backend,
) -> None:
    first = _paused(Refund.run(order_id="o-1"))
    second = Refund.run(order_id="o-1")
    assert isinstance(second, Failure) and second.step_name == "approval"
    assert second.exception_class == "reactor.errors.InterruptCorrelationError"
    assert first.run_id in second.message
    assert events == ["reserve:o-1", "reserve:o-1", "unreserve:o-1"]
    assert Refund.resume(correlation_id="refund:o-1", payload=OK).run_id == first.run_id
    third = _paused(Refund.run(order_id="o-1"))  # free again once the first was resumed
    assert third.correlation_id == "refund:o-1" and third.run_id != first.run_id


def test_a_correlation_id_that_is_not_a_string_fails_the_interrupt(memory: Backend) -> None:
    class Numbered(Reactor, name="tests.interrupts.numbered"):
        n = Input(int)
        wait = interrupt(correlation_id=input("n"))

    outcome = Numbered.run(n=3)
    assert isinstance(outcome, Failure)
    assert outcome.exception_class == "reactor.errors.InterruptCorrelationError"
    assert isinstance(outcome.error, InterruptCorrelationError)
    assert outcome.error.field == "correlation_id"


def test_a_correlation_id_cannot_be_built_from_a_secret_input() -> None:
    # a correlation id is stored (a claims-store key) and shown in clear
    with pytest.raises(DefinitionError, match="redact=True input 'card'"):
        class Leaky(Reactor, name="tests.interrupts.leaky"):
            card = Input(str, redact=True)
            wait = interrupt(correlation_id=input("card"))


@pytest.mark.parametrize("literal", ["", "   ", "x" * 256])
def test_a_bad_literal_correlation_id_is_refused_at_declaration(literal: str) -> None:
    with pytest.raises(DefinitionError, match="non-blank string of at most 255"):
        interrupt(correlation_id=literal)


def test_hostile_resume_and_declaration_arguments_get_typed_errors(memory: Backend) -> None:
    with pytest.raises(InterruptArgumentError) as too_long:
        Refund.resume(correlation_id="x" * 100_000, payload={})
    assert too_long.value.field == "correlation_id" and "x" * 300 not in str(too_long.value)
    with pytest.raises(DefinitionError, match="wait_for must be a step name"):
        interrupt(wait_for=5)  # type: ignore[arg-type]


def test_a_payload_too_large_to_store_is_refused_and_the_run_stays_paused(
    memory: Backend,
) -> None:
    config.configure(storage=memory.runtime.storage, router=memory.runtime.router,
                     clock=memory.clock, max_context_bytes=4096)
    paused = Refund.run(order_id="o-big")
    assert isinstance(paused, Paused)
    with pytest.raises(InterruptPayloadError) as refused:
        Refund.resume(paused.run_id, payload={"approver": "x" * 10_000, "approved": True})
    assert "max_context_bytes" in str(refused.value)
    assert Refund.find(paused.run_id).status is RunStatus.PAUSED  # nothing rolled back
    assert Refund.resume(paused.run_id, payload={"approver": "ops", "approved": True}).success


# ------------------------------------------------------------------------------ runs and workers


def test_a_background_run_pauses_in_its_worker_and_its_handle_sees_it(memory: Backend) -> None:
    handle = QueuedRefund.run(order_id="o-1")
    assert isinstance(handle, DispatchHandle)
    memory.worker().run_pending()
    paused = handle.wait(5)
    assert isinstance(paused, Paused) and paused.run_id == handle.run_id
    assert not memory.runtime.storage.locks.held(run_liveness_key(handle.run_id))
    outcome = QueuedRefund.resume(correlation_id="refund:o-1", payload=OK)
    assert isinstance(outcome, Success) and outcome.value == "refunded o-1 by ann"


def test_an_idempotency_key_held_by_a_paused_run_returns_its_pause(memory: Backend) -> None:
    first = _paused(Refund.run(order_id="o-1", idempotency_key="k"))
    again = Refund.run(order_id="o-1", idempotency_key="k")
    assert isinstance(again, Paused) and again.run_id == first.run_id
    assert events == ["reserve:o-1"]


def test_a_claim_whose_claimer_stopped_is_applied_by_the_next_caller(memory: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    run_id = paused.run_id or ""
    claims = memory.runtime.storage.claims
    stale = InterruptClaim("resume", memory.clock.now(), payload=Approval(**OK))  # not applied
    assert claims.claim_interrupt_resume(run_id, "approval", stale.encode())
    with pytest.raises(InterruptAlreadyResumedError):  # a young claim: its claimer may live
        Refund.resume(run_id, payload={"approver": "bob", "approved": True})
    assert Refund.find(run_id).status is RunStatus.PAUSED
    memory.clock.advance(memory.runtime.settings.context_lock_ttl + 1)
    with pytest.raises(InterruptAlreadyResumedError):  # now stale: applied, in a worker
        Refund.resume(run_id, payload={"approver": "bob", "approved": True})
    memory.worker().run_pending()
    view = Refund.find(run_id)
    assert view.status is RunStatus.COMPLETED and view.results["pay"] == "refunded o-1 by ann"
    assert events == ["reserve:o-1", "pay:o-1:ann"]


# ------------------------------------------------------------------------------ command line


def test_cli_runs_resume_and_show(memory: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_cli, "_runtime", lambda *_a, **_k: memory.runtime)
    runner = CliRunner()
    paused = _paused(Refund.run(order_id="o-1"))
    run_id = paused.run_id or ""
    shown = runner.invoke(app, ["runs", "show", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"interrupt": {' in shown.stdout and '"correlation_id": "refund:o-1"' in shown.stdout
    out = runner.invoke(app, ["runs", "resume", run_id, "--payload", "{not json"])
    assert out.exit_code == 2 and "--payload is not JSON" in out.stderr
    out = runner.invoke(app, ["runs", "resume", run_id, "--payload", '{"approver": ""}'])
    assert out.exit_code == 1 and "approver" in out.stderr and "approved" in out.stderr
    out = runner.invoke(app, ["runs", "resume", "--correlation-id", "refund:nobody",
                              "--payload", "{}"])
    assert out.exit_code == 1 and "refund:nobody" in out.stderr
    out = runner.invoke(app, ["runs", "resume", "--payload", "{}"])
    assert out.exit_code == 2 and "exactly one of run_id and correlation_id" in out.stderr
    out = runner.invoke(app, ["runs", "resume", run_id, "--step", "other", "--payload", "{}"])
    assert out.exit_code == 1 and "paused at interrupt 'approval'" in out.stderr
    out = runner.invoke(app, ["runs", "resume", "--correlation-id", "refund:o-1", "--json",
                              "--payload", '{"approver": "cli", "approved": true}'])
    assert out.exit_code == 0, out.output
    assert f'"run_id": "{run_id}"' in out.stdout and '"status": "completed"' in out.stdout
    out = runner.invoke(app, ["runs", "resume", run_id, "--payload", "{}"])
    assert out.exit_code == 1 and "already resumed" in out.stderr
    assert events == ["reserve:o-1", "pay:o-1:cli"]


def test_an_ad_hoc_schema_validates_nested_fields(memory: Backend) -> None:
    class Line(BaseModel):
        sku: str
        qty: int

    class Order(BaseModel):
        lines: list[Line]

    class Pick(Reactor, name="tests.interrupts.pick"):
        returns = "order"
        order = interrupt(schema=Order, max_attempts=1)

    paused = _paused(Pick.run())
    with pytest.raises(InterruptPayloadError) as info:
        Pick.resume(paused.run_id, payload={"lines": [{"sku": "a", "qty": "many"}]})
    assert list(info.value.field_errors) == ["lines.0.qty"] and info.value.exhausted
    assert Pick.find(paused.run_id or "").status is RunStatus.FAILED


# ------------------------------------------------------------------------------ more paths


def test_a_secret_input_reaches_the_steps_after_a_resume_from_a_fresh_runtime(
    memory: Backend,
) -> None:
    seen: list[str] = []

    class Charge(Reactor, name="tests.interrupts.charge"):
        card = Input(str, redact=True)
        returns = "charge"
        confirm = interrupt()

        @step(card=input("card"), wait_for="confirm")
        def charge(inputs: Any, ctx: Any) -> str:
            seen.append(inputs.card)
            return "charged"

    paused = _paused(Charge.run(card="tok_visa_SECRET_4242"))
    assert Charge.find(paused.run_id or "").inputs == {"card": "[REDACTED]"}
    fresh = config.configure(storage=memory.runtime.storage, router=LocalRouter())
    outcome = Charge.resume(paused.run_id, payload="yes", runtime=fresh)
    assert isinstance(outcome, Success) and outcome.value == "charged"
    assert seen == ["tok_visa_SECRET_4242"]


def test_exhaustion_with_a_background_resume_rolls_back_in_a_worker(memory: Backend) -> None:
    paused = _paused(Refund.run(order_id="o-1"))
    for attempt in (1, 2, 3):
        with pytest.raises(InterruptPayloadError) as info:
            Refund.resume(paused.run_id, payload={}, resume="background")
        assert info.value.attempts == attempt
    assert info.value.exhausted and info.value.failure is None  # the worker rolls it back
    assert events == ["reserve:o-1"]
    memory.worker().run_pending()
    assert Refund.find(paused.run_id or "").status is RunStatus.FAILED
    assert events == ["reserve:o-1", "unreserve:o-1"]


def test_two_interrupts_in_a_row_may_share_a_correlation_id(memory: Backend) -> None:
    class TwoKeys(Reactor, name="tests.interrupts.two_keys"):
        order_id = Input(str)
        first = interrupt(correlation_id=input("order_id"))
        second = interrupt(wait_for="first", correlation_id=input("order_id"))

        @step(a=result("first"), b=result("second"))
        def both(inputs: Any, ctx: Any) -> str:
            return f"{inputs.a}+{inputs.b}"

    first = _paused(TwoKeys.run(order_id="o-1"))
    second = _paused(TwoKeys.resume(correlation_id="o-1", payload="a"))
    assert (first.step, second.step) == ("first", "second")
    assert second.run_id == first.run_id and second.correlation_id == "o-1"
    done = TwoKeys.resume(correlation_id="o-1", payload="b", step="second")
    assert isinstance(done, Success) and done.value["both"] == "a+b"
    view = TwoKeys.find(first.run_id or "")
    assert [(t.type, t.step) for t in view.trace] == [
        ("paused", "first"), ("resumed", "first"), ("paused", "second"),
        ("resumed", "second"), ("run", "both"),
    ]


def test_reactor_level_locks_are_released_while_paused_and_taken_again_on_resume(
    memory: Backend,
) -> None:
    from reactor import with_lock

    class Locked(Reactor, name="tests.interrupts.locked"):
        account = Input(str)
        coordination = [with_lock(key=lambda inputs: f"acct:{inputs.account}", wait=0)]
        returns = "book"
        approve = interrupt()

        @step(wait_for="approve")
        def book(inputs: Any, ctx: Any) -> str:
            held = memory.runtime.storage.locks.held("acct:a")
            return f"booked under lock: {held}"

    first = _paused(Locked.run(account="a"))
    assert not memory.runtime.storage.locks.held("acct:a")  # released by the pause
    second = _paused(Locked.run(account="a"))  # so another run of the account gets in
    assert Locked.resume(first.run_id, payload=True).value == "booked under lock: True"
    assert Locked.resume(second.run_id, payload=True).success
    assert not memory.runtime.storage.locks.held("acct:a")
