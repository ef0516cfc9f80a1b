"""A stale writer can never overwrite a run (docs/workers.md, "Stale writers and fenced saves").

A worker frozen (GC pause, SIGSTOP, stalled VM) *between* its liveness check and its checkpoint
write, resumed after another worker took the run over and completed it, must be refused by the
store itself: its save carries its fencing token, which is lower than the take-over's.

The freeze is simulated deterministically on the memory storage with one :class:`ManualClock`:
the first execution's checkpoint is intercepted after ``Liveness.check`` passed; while it is
"frozen" the clock passes the lock TTL (its extender never ran), a second worker (another
thread, joined) takes the run over and completes it, then the first execution's write goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, Input, Reactor, config, input, step
from reactor.config import Runtime
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.liveness import FencedCheckpointer
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from reactor.ports.payloads import RunPayload, job

EVENTS: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    EVENTS.clear()
    yield


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def local(clock: ManualClock) -> Iterator[Runtime]:
    """Memory storage + local router on one manual clock; liveness TTL 10 s."""
    rt = config.configure(
        storage=MemoryStorage(clock=clock),
        router=LocalRouter(clock=clock, visibility_timeout=30),
        context_lock_ttl=10,
    )
    yield rt
    config.reset()


def _mk(name: str, **extra: Any) -> Any:
    @step(x=input("x"), **extra)
    def fn(inputs: Any, ctx: Any) -> Any:
        EVENTS.append(f"run:{name}")
        return f"{name}:{inputs.x}"

    return fn


class TwoSteps(Reactor, name="stale.two"):
    x = Input(int)
    a = _mk("a")
    b = _mk("b", wait_for="a")
    background = Background(all=True)


def test_a_writer_frozen_between_its_fence_check_and_its_save_never_overwrites_the_run(
    local: Runtime, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = TwoSteps.run(x=1)
    run_id = handle.run_id
    stale_thread = threading.get_ident()
    write = Checkpointer.save  # runs after FencedCheckpointer.save's Liveness.check
    seen: dict[str, Any] = {}

    def frozen_then_write(self: Checkpointer, *, force: bool = True) -> None:
        if (
            "frozen" not in seen
            and isinstance(self, FencedCheckpointer)
            and threading.get_ident() == stale_thread
            and EVENTS == ["run:a"]
        ):
            # Frozen here: the check passed, the checkpoint after step a is not written yet.
            seen["frozen"] = True
            clock.advance(11)  # past the 10 s TTL: no extend ran while frozen
            assert not local.storage.locks.held(run_liveness_key(run_id))
            # The run sweeper's re-dispatch, taken by another worker that completes the run.
            local.router.enqueue(job(RunPayload(context_id=run_id, reactor="stale.two")))
            other = threading.Thread(target=Worker(local, liveness_wait=0.0).run_pending)
            other.start()
            other.join()
            done = local.storage.contexts.load(run_id)
            assert done is not None and done.status == RunStatus.COMPLETED.value
            try:
                write(self, force=force)  # the stale write, after the thaw
            finally:
                after = local.storage.contexts.load(run_id)
                seen["status_after_stale_write"] = after.status if after else None
            return
        write(self, force=force)

    monkeypatch.setattr(Checkpointer, "save", frozen_then_write)
    stale = Worker(local, liveness_wait=0.0)
    stale.run_pending()

    assert seen["frozen"]
    assert seen["status_after_stale_write"] == RunStatus.COMPLETED.value  # refused
    # a ran twice (the frozen execution's result was never recorded), b once: no third run.
    assert EVENTS == ["run:a", "run:a", "run:b"]
    assert stale.jobs_dead_lettered == 0
    assert TwoSteps.find(run_id).status is RunStatus.COMPLETED
    assert handle.wait(timeout=1).value == {"a": "a:1", "b": "b:1"}
    assert not local.storage.locks.held(run_liveness_key(run_id))  # nobody left holding it
    assert Worker(local, liveness_wait=0.0).run_pending() == 0
    assert EVENTS == ["run:a", "run:a", "run:b"]


def test_a_synchronous_caller_frozen_past_its_lock_cannot_overwrite_the_take_over(
    local: Runtime, clock: ManualClock
) -> None:
    """A synchronous run is fenced like a worker: when its caller stalls past the liveness TTL
    and another execution takes the run over and saves it, the caller's next checkpoint is
    refused by the store and nothing of the take-over's progress is overwritten."""
    from reactor.coordination import Lock
    from reactor.engine.checkpoint import load_context
    from reactor.engine.env import make_env
    from reactor.errors import StaleWriterError
    from reactor.model.records import Fence

    class _FixedFence(Checkpointer):
        def __init__(self, env: Any, ctx: Any, fence: Fence) -> None:
            super().__init__(env, ctx)
            self._fence = fence

        def fence(self) -> Fence:
            return self._fence

    storage = local.storage
    taken: list[str] = []

    def freeze_and_take_over(inputs: Any, ctx: Any) -> str:
        clock.advance(11)  # the caller stalls past context_lock_ttl; its extender never ran
        thief = Lock(storage.locks, run_liveness_key(ctx.run_id), ttl=10, auto_extend=False)
        assert thief.try_acquire()  # a worker takes the run over (a newer fencing token)
        env = make_env(local)
        stored = load_context(env, ctx.run_id)
        assert stored is not None
        stored.status = RunStatus.COMPLETED  # ...and finishes it
        _FixedFence(env, stored, Fence(thief.key, thief.owner, thief.token)).save()
        taken.append(ctx.run_id)
        return "late"

    class Sync(Reactor):
        x = Input(int)
        a = _mk("a")
        b = step(freeze_and_take_over)

    with pytest.raises(StaleWriterError):
        Sync.run(x=1)
    env = make_env(local)
    stored = load_context(env, taken[0])
    assert stored is not None and stored.status is RunStatus.COMPLETED
    assert "b" not in stored.intermediate_results  # the stale caller's result never landed
