"""A step whose lock, semaphore lease or ordered turn is lost while it runs never has its result
recorded as if it held it (docs/coordination.md, "Renewal and loss"); steps see their holds and
fencing tokens ("Holds", "Fencing tokens").

The renewer runs on real time (1 s leases, the minimum); each body waits on the hold's own state
(``ctx.hold_lost``), bounded by a timeout only a failing test reaches.
"""

from __future__ import annotations

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

TIMEOUT = 10.0


class FaultyExtends:
    """A lock or semaphore sub-store whose ``extend`` raises for keys not starting with
    ``async:`` (the run's own liveness lock stays healthy)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def extend(self, key: str, *args: Any) -> bool:
        if not key.startswith("async:"):
            raise StorageError(f"injected outage extending {key}")
        return bool(self._inner.extend(key, *args))

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
    monkeypatch.setattr(storage, "locks", FaultyExtends(storage.locks))
    undone: list[str] = []

    class First(Step):
        def run(self) -> int:
            return 1

        def undo(self) -> None:
            undone.append("first")

    class Slow(Step):
        def run(self) -> int:
            # Work until someone else could take the run's lock (it lapsed in the store).
            deadline = time.monotonic() + TIMEOUT
            while not storage.locks.acquire("acct:a2", "other", 30.0):
                assert time.monotonic() < deadline, "the lock never lapsed"
                time.sleep(0.02)
            storage.locks.release("acct:a2", "other")
            return 2

    class Guarded(Reactor):
        account = Input(str)
        coordination = with_lock(key=lambda i: f"acct:{i.account}", ttl=1)
        first = step(First)
        slow = step(Slow)

    outcome = Guarded.run(account="a2")
    assert isinstance(outcome, Failure) and isinstance(outcome.error, LockLost)
    assert outcome.step_name == "slow" and undone == ["first"]
    assert "slow" not in Guarded.find(outcome.run_id).results


def test_a_take_over_fails_the_step(storage: Storage) -> None:
    """An extend answering False (the store gave the lock to someone else) fails the step."""

    class Steal(Step):
        coordination = with_lock(key="shared", ttl=1)

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


def test_a_healthy_1s_lock_is_held_through_a_3s_step(storage: Storage) -> None:
    seen: list[bool] = []

    class Long(Step):
        coordination = with_lock(key="long", ttl=1)

        def run(self) -> str:
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                seen.append(not storage.locks.acquire("long", "intruder", 30.0))
                time.sleep(0.05)
            return "ok"

    class Held(Reactor):
        long = step(Long)

    assert Held.run().success
    assert seen and all(seen)


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
