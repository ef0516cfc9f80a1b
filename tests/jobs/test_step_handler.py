"""The ``step`` job handler (reactor/jobs/handlers/step.py): duplicate drops, contention parks
stamped on the Step Result Record, the step sweeper's view of parks, the park cap, the unit's own
park state kept on its record, and the single-writer rule (seeds 000/003 ``step_worker.rb``,
``step_sweeper.rb``).

Everything runs on a manual clock: the memory storage and the local router share it, and jobs
are processed in the test's thread with ``Worker.run_pending``. The runtime's clock is a fake
one: retry waits inside a unit's job are recorded on it, never slept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import (
    Failure,
    Reactor,
    Retries,
    Success,
    async_step,
    config,
    with_lock,
    with_ordered_lock,
    with_semaphore,
)
from reactor.config import Runtime
from reactor.coordination import Lock, Semaphore
from reactor.engine.async_step import PARK_SWEEP_GRACE, outcome_of
from reactor.errors import SnoozeLimitError
from reactor.jobs.handlers.step import unit_owner
from reactor.jobs.sweepers import sweep_steps
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.keys import step_liveness_key
from reactor.model.records import StepResultRecord
from tests.fake_clock import FakeClock

START = 1_795_953_600.0
DELAY = 1.0


class Env:
    """The manual-clock runtime of one test."""

    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock(START)
        self.waits = FakeClock(START)
        self.storage = MemoryStorage(clock=self.clock)
        self.router = LocalRouter(clock=self.clock)
        self.runtime: Runtime = config.configure(
            storage=self.storage, router=self.router, clock=self.waits,
            lock_snooze_base_delay=DELAY, lock_snooze_jitter=0, **settings,
        )
        self.worker = Worker(self.runtime, liveness_wait=0.0)

    def record(self, run_id: str, step: str = "unit") -> StepResultRecord:
        record = self.storage.step_results.get(run_id, step)
        assert record is not None
        return record

    def deliver(self) -> int:
        return self.worker.run_pending()


@pytest.fixture
def make_env() -> Iterator[Any]:
    yield Env
    config.reset()


def _dispatch(reactor: type[Reactor]) -> str:
    out = reactor.run()
    assert isinstance(out, Success) and out.run_id is not None
    return out.run_id


def test_park_is_stamped_and_not_swept_until_its_window_lapses(make_env: Any) -> None:
    env = make_env()
    ran: list[str] = []

    class R(Reactor):
        @async_step(coordination=with_lock(key="shared", auto_extend=False))
        def unit(inputs: Any, ctx: Any) -> str:
            ran.append("body")
            return "done"

    blocker = Lock(env.storage.locks, "shared", owner="other", auto_extend=False)
    assert blocker.try_acquire()
    run_id = _dispatch(R)
    assert env.deliver() == 1
    parked = env.record(run_id)
    assert parked.status == "dispatched" and ran == []
    assert parked.parked_until == pytest.approx(START + DELAY + PARK_SWEEP_GRACE)
    assert parked.waiting == "shared" and parked.contention_attempts == 1
    assert env.router.size() == 1  # the redelivery, delayed
    assert env.deliver() == 0  # not due yet

    # parked, not lost: the sweeper leaves it alone while the window lasts
    assert sweep_steps(env.storage, env.router).redispatched == 0
    env.clock.advance(DELAY + PARK_SWEEP_GRACE - 0.5)
    assert sweep_steps(env.storage, env.router).redispatched == 0

    # past the window a late redelivery looks lost: swept, carrying the contention count
    env.clock.advance(1.0)
    blocker.release()
    assert sweep_steps(env.storage, env.router).redispatched == 1
    assert env.deliver() == 2  # the parked redelivery and the swept duplicate
    done = env.record(run_id)
    assert done.status == "completed" and outcome_of(done) == Success("done")
    assert done.parked_until is None and done.waiting is None
    assert ran == ["body"]  # the second delivery found the record completed and dropped itself


def test_a_concurrent_duplicate_is_dropped_by_the_unit_lock(make_env: Any) -> None:
    env = make_env()
    ran: list[str] = []

    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> None:
            ran.append("body")

    run_id = _dispatch(R)
    live = Lock(env.storage.locks, step_liveness_key(run_id, "unit"), owner="live",
                auto_extend=False)
    assert live.try_acquire()
    assert env.deliver() == 1
    assert ran == [] and env.record(run_id).status == "dispatched"
    assert sweep_steps(env.storage, env.router).redispatched == 0  # alive
    live.release()
    assert sweep_steps(env.storage, env.router).redispatched == 1  # now lost: re-dispatched
    env.deliver()
    assert ran == ["body"] and env.record(run_id).status == "completed"


def test_parks_are_capped_by_lock_snooze_max_attempts(make_env: Any) -> None:
    env = make_env(lock_snooze_max_attempts=1)

    class R(Reactor):
        @async_step(coordination=[with_lock(key="mine", auto_extend=False),
                                  with_semaphore(key="pool", limit=1)])
        def unit(inputs: Any, ctx: Any) -> None:
            raise AssertionError("never runs")

    blocker = Semaphore(env.storage.semaphores, "pool", limit=1, holder="other",
                        auto_extend=False)
    assert blocker.try_acquire()
    run_id = _dispatch(R)
    env.deliver()
    assert env.record(run_id).contention_attempts == 1
    assert env.storage.locks.held("mine")  # detached, kept for the redelivery
    env.clock.advance(DELAY)
    env.deliver()
    done = env.record(run_id)
    assert done.status == "completed" and done.contention_attempts == 1
    failure = outcome_of(done)
    assert isinstance(failure, Failure) and not failure.retryable
    assert "SnoozeLimitError" in (failure.exception_class or "")
    assert not env.storage.locks.held("mine")  # the parked hold was released at the cap
    assert isinstance(SnoozeLimitError("x"), Exception)


def test_park_state_lives_on_the_record_and_is_readopted(make_env: Any) -> None:
    env = make_env()
    counts: list[int] = []

    class R(Reactor):
        @async_step(coordination=[with_ordered_lock(key="seq"),
                                  with_lock(key="mine", auto_extend=False),
                                  with_semaphore(key="pool", limit=1)])
        def unit(inputs: Any, ctx: Any) -> str:
            info = env.storage.locks.info("mine")
            assert info is not None
            counts.append(info.count)
            return "ok"

    blocker = Semaphore(env.storage.semaphores, "pool", limit=1, holder="other",
                        auto_extend=False)
    assert blocker.try_acquire()
    run_id = _dispatch(R)
    before = env.storage.contexts.load(run_id)
    env.deliver()
    parked = env.record(run_id)
    owner = unit_owner(run_id, "unit")
    assert parked.data["parked_holds"] == [{"primitive": "lock", "key": "mine", "owner": owner}]
    assert parked.data["ordered_lock"]["key"] == "seq"
    assert parked.data["ordered_lock"]["nonce"] == 1
    info = env.storage.locks.info("mine")
    assert info is not None and info.owner == owner  # per-unit owner, never the root id

    blocker.release()
    env.clock.advance(DELAY)
    env.deliver()
    done = env.record(run_id)
    assert outcome_of(done) == Success("ok")
    assert counts == [1]  # re-adopted: not acquired a second time
    assert not env.storage.locks.held("mine")
    # single writer: the unit never wrote its parent's context back
    after = env.storage.contexts.load(run_id)
    assert before is not None and after is not None
    assert after.document == before.document and after.updated_at == before.updated_at


def test_a_park_gives_the_retry_attempt_back(make_env: Any) -> None:
    env = make_env()
    attempts: list[int] = []

    def grab_while_sleeping(seconds: float) -> None:  # someone takes the lock between attempts
        assert env.storage.locks.acquire("shared", "other", None)

    env.waits.on_sleep = grab_while_sleeping  # the retry wait, on the runtime's clock

    class R(Reactor):
        @async_step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=1),
                    coordination=with_lock(key="shared", auto_extend=False))
        def unit(inputs: Any, ctx: Any) -> str:
            attempts.append(ctx.attempt)
            if len(attempts) == 1:
                raise RuntimeError("flaky")
            return "second"

    run_id = _dispatch(R)
    env.deliver()  # attempt 1 fails; attempt 2 finds the lock held and parks
    parked = env.record(run_id)
    assert parked.status == "dispatched" and parked.data["attempts"] == 1
    env.storage.locks.release("shared", "other")
    env.clock.advance(DELAY)
    env.deliver()
    done = env.record(run_id)
    assert outcome_of(done) == Success("second")
    assert attempts == [1, 2]  # the parked attempt did not count
    assert env.waits.sleeps == [1.0]  # the retry wait inside the job, on the runtime's clock


def test_a_unit_whose_parent_is_gone_completes_with_a_failure(make_env: Any) -> None:
    env = make_env()

    class R(Reactor):
        @async_step()
        def unit(inputs: Any, ctx: Any) -> None:
            raise AssertionError("never runs")

    run_id = _dispatch(R)
    assert env.storage.contexts.delete(run_id)
    env.deliver()
    failure = outcome_of(env.record(run_id))
    assert isinstance(failure, Failure) and "not stored" in failure.message


def test_a_crashed_unit_keeps_its_ordered_place_and_the_line_waits_only_for_it(
    make_env: Any,
) -> None:
    """A unit holding a step-level ordered lock that dies mid-body is recovered with the ticket
    it had: its successors proceed as soon as it finishes, not after the poison-pill timeout,
    and it does not lose its place to the back of the line."""
    env = make_env()
    calls: list[int] = []

    class R(Reactor):
        @async_step(coordination=with_ordered_lock(key="seq", poison_pill_timeout=600))
        def unit(inputs: Any, ctx: Any) -> tuple[int, int] | None:
            calls.append(len(calls))
            if len(calls) == 1:  # the worker dies here: nothing below the body runs
                raise KeyboardInterrupt
            return ctx.ordered_ticket

    first, second = _dispatch(R), _dispatch(R)
    with pytest.raises(KeyboardInterrupt):
        env.deliver()  # the first unit dies inside its body, holding nonce 1
    assert env.record(first).data["ordered_lock"]["nonce"] == 1  # stored before the turn
    env.clock.advance(env.router.visibility_timeout + 1)  # its job is delivered again
    for _ in range(10):
        env.deliver()
        if env.record(first).status == "completed" and env.record(second).status == "completed":
            break
        env.clock.advance(DELAY + 1)  # a park's re-check, far below the 600 s poison pill
    assert env.record(first).status == "completed"
    assert env.record(second).status == "completed"
    assert env.clock() - START < 60  # nobody waited for the poison pill
    first_out, second_out = outcome_of(env.record(first)), outcome_of(env.record(second))
    assert isinstance(first_out, Success) and isinstance(second_out, Success)
    assert first_out.value[1] == 1 and second_out.value[1] == 2  # places kept, in order
