"""A step whose lock, semaphore lease or ordered turn is lost while it runs never has its result
recorded as if it held it (docs/coordination.md, "Renewal and loss"); steps see their holds and
fencing tokens ("Holds", "Fencing tokens").

The renewer runs on real time (1 s leases, the minimum, where the hold is meant to be lost);
each body waits on the hold's own state (``ctx.hold_lost``) or on counted renewals, bounded by a
timeout only a failing test reaches. A hold that must be kept has a lease long enough that a
renewal coming late on a loaded machine (or from a slow test server) still lands in time.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import (
    Input,
    Reactor,
    Settings,
    Step,
    StepContext,
    input,
    step,
    with_lock,
    with_ordered_lock,
    with_semaphore,
)
from reactor import config as reactor_config
from reactor.errors import DefinitionError, LockLost, StorageError
from reactor.memory import MemoryStorage
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus
from reactor.ports.storage import Storage

TIMEOUT = 60.0


class FaultyExtends:
    """A lock or semaphore sub-store whose ``extend`` raises for keys not starting with
    ``async:`` (the run's own liveness lock stays healthy); with ``armed``, only once that
    event is set (so the outage starts where the test says, not at the first renewal)."""

    def __init__(self, inner: Any, armed: threading.Event | None = None) -> None:
        self._inner = inner
        self._armed = armed

    def extend(self, key: str, *args: Any) -> bool:
        armed = self._armed is None or self._armed.is_set()
        if armed and not key.startswith("async:"):
            raise StorageError(f"injected outage extending {key}")
        return bool(self._inner.extend(key, *args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CountedExtends:
    """A lock sub-store counting the successful ``extend`` calls of one key (a probe)."""

    def __init__(self, inner: Any, key: str) -> None:
        self._inner = inner
        self._key = key
        self._cond = threading.Condition()
        self.renewals = 0

    def extend(self, key: str, *args: Any) -> bool:
        extended = bool(self._inner.extend(key, *args))
        if extended and key == self._key:
            with self._cond:
                self.renewals += 1
                self._cond.notify_all()
        return extended

    def reached(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` renewals succeeded; False after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.renewals >= n, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _storage_url(name: str, service_url: Callable[[str], str]) -> str:
    token = f"hold{uuid.uuid4().hex[:10]}"
    if name == "redis":
        return f"{service_url('redis')}?prefix={token}"
    if name == "mongodb":
        return f"{service_url('mongodb_wire')}&prefix={token}_"
    # One process, one clock: a 0.25 s skew budget keeps 1 s leases usable (docs/coordination.md).
    return (f"dynamodb://reactor-hold?region=us-east-1&endpoint_url={service_url('moto')}"
            f"&prefix={token}&clock_skew_budget=0.25")


@pytest.fixture(params=["memory", "redis", "mongodb", "dynamodb"])
def storage(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Storage]:
    """The run storage: memory and every real backend (their TTLs run on their own clocks)."""
    url = "memory://" if request.param == "memory" else _storage_url(request.param, service_url)
    runtime = reactor_config.configure(storage=url, router="inline://")
    yield runtime.storage
    reactor_config.reset()


@pytest.fixture
def memory_storage() -> MemoryStorage:
    memory = MemoryStorage()
    reactor_config.configure(storage=memory, router="inline://")
    return memory


def wait_for_loss(ctx: StepContext) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not ctx.hold_lost:
        assert time.monotonic() < deadline, "the hold was never reported lost"
        time.sleep(0.02)


def test_a_step_whose_lock_extends_fail_past_the_deadline_fails_with_lock_lost(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "locks", FaultyExtends(storage.locks))
    compensated: list[str] = []
    undone: list[str] = []

    class Reserve(Step):
        def run(self) -> str:
            return "reserved"

        def undo(self) -> None:
            undone.append("reserve")

    class Charge(Step):
        account = Input(str)
        coordination = with_lock(key=lambda i: f"acct:{i.account}", ttl=1)

        def run(self) -> str:
            wait_for_loss(self.context)
            return "charged"

        def compensate(self) -> None:
            compensated.append("charge")

    class Pay(Reactor):
        account = Input(str)
        reserve = step(Reserve)
        charge = step(Charge, account=input("account"))

    outcome = Pay.run(account="a1")
    assert isinstance(outcome, Failure) and isinstance(outcome.error, LockLost)
    assert outcome.step_name == "charge"
    assert compensated == ["charge"] and undone == ["reserve"]
    view = Pay.find(outcome.run_id)
    assert view.status == RunStatus.FAILED.value
    lost = [e for e in view.trace if e.type == "hold_lost"]
    assert len(lost) == 1 and lost[0].step == "charge" and lost[0].at > 0
    assert lost[0].detail is not None and "lock 'acct:a1'" in lost[0].detail


def test_a_step_under_a_reactor_lock_that_lapsed_is_not_recorded(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the outage starts in ``slow``; until then the 5 s lease is renewed every 1.7 s, so a
    # renewal may come 3 s late (a slow server, a loaded machine: a 1 s lease lapsed while
    # ``first`` was saved on moto at load 15 and failed the wrong step)
    outage = threading.Event()
    monkeypatch.setattr(storage, "locks", FaultyExtends(storage.locks, outage))
    undone: list[str] = []

    class First(Step):
        def run(self) -> int:
            return 1

        def undo(self) -> None:
            undone.append("first")

    class Slow(Step):
        def run(self) -> int:
            outage.set()
            # Work until someone else could take the run's lock (it lapsed in the store).
            deadline = time.monotonic() + TIMEOUT
            while not storage.locks.acquire("acct:a2", "other", 30.0):
                assert time.monotonic() < deadline, "the lock never lapsed"
                time.sleep(0.02)
            storage.locks.release("acct:a2", "other")
            return 2

    class Guarded(Reactor):
        account = Input(str)
        coordination = with_lock(key=lambda i: f"acct:{i.account}", ttl=5)
        first = step(First)
        slow = step(Slow)

    outcome = Guarded.run(account="a2")
    assert isinstance(outcome, Failure) and isinstance(outcome.error, LockLost)
    assert outcome.step_name == "slow" and undone == ["first"]
    assert "slow" not in Guarded.find(outcome.run_id).results


def test_a_take_over_fails_the_step(storage: Storage) -> None:
    """An extend answering False (the store gave the lock to someone else) fails the step.
    3 s: the first renewal, a second in, is refused; on a loaded machine with a slow test
    server it may answer up to 1.75 s late before the lease's own deadline (3 s less the
    skew budget) would report the loss as a lapse instead (a 1 s lease did, in CI)."""

    class Steal(Step):
        coordination = with_lock(key="shared", ttl=3)

        def run(self) -> str:
            storage.locks.release("shared", self.context.root_run_id or "")
            assert storage.locks.acquire("shared", "thief", 30.0)
            wait_for_loss(self.context)
            return "done"

    class Taken(Reactor):
        steal = step(Steal)

    outcome = Taken.run()
    assert isinstance(outcome, Failure) and outcome.step_name == "steal"
    # The step failed with LockLost; its compensation could not re-take the thief's lock, so
    # the run's error is the CompensationError quoting the loss.
    assert "lock 'shared' lost: an extend was refused" in str(outcome.error)
    info = storage.locks.info("shared")
    assert info is not None and info.owner == "thief"  # the late release freed nothing
    # The rollback could not re-take the thief's lock: reported, the hook skipped.
    assert [f.reason for f in outcome.rollback_failures] == ["coordination_unavailable"]


def test_a_lost_semaphore_lease_fails_the_step(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "semaphores", FaultyExtends(storage.semaphores))

    class Call(Step):
        coordination = with_semaphore(key="gateway", limit=1, lease=1)

        def run(self) -> str:
            wait_for_loss(self.context)
            return "called"

    class Api(Reactor):
        call = step(Call)

    outcome = Api.run()
    assert isinstance(outcome, Failure) and isinstance(outcome.error, LockLost)
    assert outcome.error.primitive == "semaphore"


def test_raise_if_lost_stops_long_work_and_the_step_is_compensated(
    memory_storage: MemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = memory_storage
    monkeypatch.setattr(storage, "locks", FaultyExtends(storage.locks))
    chunks: list[int] = []
    compensated: list[bool] = []

    class Batch(Step):
        coordination = with_lock(key="batch", ttl=1)

        def run(self) -> int:
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                self.context.raise_if_lost()
                chunks.append(len(chunks))
                time.sleep(0.02)
            return len(chunks)

        def compensate(self) -> None:
            compensated.append(True)

    class Job(Reactor):
        batch = step(Batch)

    outcome = Job.run()
    assert isinstance(outcome, Failure) and isinstance(outcome.error, LockLost)
    assert chunks and compensated == [True]


def test_a_healthy_lock_is_held_through_a_step_longer_than_its_lease(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3 s: renewed every second, a renewal may come 2 s late (a loaded machine, a slow test
    # server) before the lease lapses; the step outlasts the lease by counted renewals, not
    # by the clock
    counted = CountedExtends(storage.locks, "long")
    monkeypatch.setattr(storage, "locks", counted)
    seen: list[bool] = []

    class Long(Step):
        coordination = with_lock(key="long", ttl=3)

        def run(self) -> str:
            deadline = time.monotonic() + TIMEOUT
            while not counted.reached(4, timeout=0.05):  # 4 renewals: past the first lease
                seen.append(not storage.locks.acquire("long", "intruder", 30.0))
                assert not self.context.hold_lost
                assert time.monotonic() < deadline, f"{counted.renewals} renewals only"
            seen.append(not storage.locks.acquire("long", "intruder", 30.0))
            return "ok"

    class Held(Reactor):
        long = step(Long)

    outcome = Held.run()
    assert outcome.success, outcome
    assert counted.renewals >= 4 and seen and all(seen)


def test_steps_see_their_holds_and_fencing_tokens(storage: Storage) -> None:
    seen: list[StepContext] = []

    class Write(Step):
        coordination = [with_lock(key="resource", ttl=5), with_semaphore(key="pool", limit=2)]

        def run(self) -> None:
            seen.append(self.context)

    class Writer(Reactor):
        coordination = with_ordered_lock(key="line")
        write = step(Write)

    assert Writer.run().success
    assert Writer.run().success
    first, second = seen
    assert [(h.primitive, h.scope) for h in first.holds] == [
        ("ordered_lock", "reactor"), ("lock", "step"), ("semaphore", "step"),
    ]
    assert first.hold_lost is False
    first_token, second_token = first.fencing_token, second.fencing_token
    assert first_token is not None and second_token is not None
    assert second_token > first_token >= 1
    assert first.ordered_ticket is not None and second.ordered_ticket is not None
    assert second.ordered_ticket > first.ordered_ticket


def test_leases_below_the_minimum_are_refused_where_declared() -> None:
    with pytest.raises(DefinitionError, match=r"with_lock\(ttl=\).*>= 1"):
        with_lock(ttl=0.5)
    with pytest.raises(DefinitionError, match=r"with_semaphore\(lease=\)"):
        with_semaphore(limit=1, lease=0.9)
    with pytest.raises(DefinitionError, match=r"with_ordered_lock\(poison_pill_timeout=\)"):
        with_ordered_lock(poison_pill_timeout=0.5)
    assert with_lock(ttl=0.5, auto_extend=False).ttl == 0.5  # not renewed: any TTL > 0
    with pytest.raises(ValueError, match="context_lock_ttl"):
        Settings(context_lock_ttl=0.5)


def test_a_successful_step_under_healthy_holds_is_recorded(
    memory_storage: MemoryStorage,
) -> None:
    class Quick(Step):
        coordination = with_lock(key="q", ttl=1)

        def run(self) -> str:
            return "fine"

    class Fine(Reactor):
        quick = step(Quick)
        returns = "quick"

    outcome = Fine.run()
    assert isinstance(outcome, Success) and outcome.value == "fine"
    assert not [e for e in Fine.find(outcome.run_id).trace if e.type == "hold_lost"]
