"""A run's liveness lock travels with its records (docs/protocol.md, "Optional fast paths";
docs/workers.md, "Stale writers and fenced saves").

On every backend (native on a single Redis server, the composition elsewhere): a synchronous
run takes ``async:<id>`` with its first save and holds it while its steps run; its final save
releases it; a run whose lock another owner already holds runs unlocked and leaves that lock
alone; a worker's final save releases the lock and publishes the completion once; a fan-out
element's settle releases the element's lock (tests/engine/test_fan_out*.py). The round
trips this saves on Redis: tests/adapters/redis/test_run_round_trips.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, Input, Reactor, config, input, step
from reactor.config import Runtime
from reactor.engine import api
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.keys import run_completion_channel, run_liveness_key
from reactor.model.status import RunStatus
from tests.backends import BACKENDS, backend_urls

#: What a step saw of its run's liveness lock: ``(run id, owner or None)``.
seen: list[tuple[str, str | None]] = []


def _look(ctx: Any) -> None:
    info = config.current().storage.locks.info(run_liveness_key(ctx.run_id))
    seen.append((ctx.run_id, None if info is None else info.owner))


class Chain(Reactor, name="test_liveness_with_records.chain"):
    returns = "second"
    n = Input(int)

    @step(n=input("n"))
    def first(inputs: Any, ctx: Any) -> int:
        _look(ctx)
        return int(inputs.n) + 1

    @step(after="first")
    def second(inputs: Any, ctx: Any) -> int:
        _look(ctx)
        return int(ctx.results["first"]) + 1


class Queued(Reactor, name="test_liveness_with_records.queued"):
    returns = "second"
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def first(inputs: Any, ctx: Any) -> int:
        _look(ctx)
        return int(inputs.n) + 1

    @step(after="first")
    def second(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["first"]) + 1


def _configure(name: str, service_url: Callable[[str], str], token: str) -> Runtime:
    if name == "memory":
        return config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    storage, router = backend_urls(name, service_url, token, area="liveness")
    return config.configure(storage=storage, router=router)


@pytest.fixture(params=BACKENDS)
def runtime(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    seen.clear()
    built = _configure(request.param, service_url, f"lv{uuid.uuid4().hex[:8]}")
    try:
        yield built
    finally:
        config.reset()


def test_a_sync_run_holds_its_lock_from_its_first_save_to_its_final_one(
    runtime: Runtime,
) -> None:
    result = Chain.run(n=1)
    assert result.success and result.value == 3
    owners = {owner for _, owner in seen}
    assert len(seen) == 2 and len(owners) == 1 and None not in owners, seen
    assert runtime.storage.locks.info(run_liveness_key(result.run_id)) is None
    assert Chain.find(result.run_id).status is RunStatus.COMPLETED


def test_a_run_whose_lock_another_owner_holds_runs_unlocked_and_leaves_it(
    runtime: Runtime,
) -> None:
    run_id = str(uuid.uuid4())
    key = run_liveness_key(run_id)
    assert runtime.storage.locks.acquire(key, "squatter", 60.0)
    result = api.run(Chain.definition, {"n": 1}, context_id=run_id)
    assert result.success and result.value == 3
    assert [owner for _, owner in seen] == ["squatter", "squatter"]
    info = runtime.storage.locks.info(key)
    assert info is not None and info.owner == "squatter", "never released by the run"
    assert Chain.find(run_id).status is RunStatus.COMPLETED


def test_a_worker_run_releases_its_lock_and_announces_its_completion_once(
    runtime: Runtime,
) -> None:
    handle = Queued.run(n=1)
    run_id = handle.run_id
    signals = runtime.storage.signals
    subscription = (
        signals.subscribe(run_completion_channel(run_id))
        if signals is not None and runtime.storage.capabilities.signals else None
    )
    try:
        assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
        view = Queued.find(run_id)
        assert view.status is RunStatus.COMPLETED
        assert [owner is not None for _, owner in seen] == [True], "held while the step ran"
        assert runtime.storage.locks.info(run_liveness_key(run_id)) is None
        if subscription is not None:
            assert subscription.get(5.0) == "completed"
            assert subscription.get(0.2) is None, "announced once"
    finally:
        if subscription is not None:
            subscription.close()
