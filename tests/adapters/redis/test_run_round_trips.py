"""What whole runs cost on Redis in round trips (docs/adapters/redis.md, "Round trips").

A run's liveness lock travels with its records (docs/protocol.md, "Optional fast paths"): a
synchronous run of N steps costs exactly its N + 1 checkpoints (the first save takes the lock,
the final one releases it); a worker run costs its checkpoints plus the job's receive, the
lock-with-load and the ack (the final checkpoint releases the lock and publishes the
completion). Counted on the client like benchmarks/_roundtrips.py (one send = one round trip).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, Input, Reactor, config, input, step
from reactor.jobs.worker import Worker
from reactor.model.status import RunStatus
from tests.adapters.redis.round_trips import RoundTrips

pytestmark = pytest.mark.redis


class Three(Reactor, name="test_run_round_trips.three"):
    returns = "c"
    n = Input(int)

    @step(n=input("n"))
    def a(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) + 1

    @step(after="a")
    def b(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["a"]) + 1

    @step(after="b")
    def c(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["b"]) + 1


class QueuedThree(Three, name="test_run_round_trips.queued_three"):
    background = Background(all=True)


RAN: list[str] = []


class SelfCancelling(Reactor, name="test_run_round_trips.self_cancelling"):
    """Step ``b`` asks to cancel its own run: the request is only recorded (the run's own
    execution holds it) and the run must learn of it from a checkpoint's reply."""

    @step()
    def a(inputs: Any, ctx: Any) -> int:
        RAN.append("a")
        return 1

    @a.undo
    def _undo_a(value: Any, inputs: Any, ctx: Any) -> None:
        RAN.append("undo a")

    @step(after="a")
    def b(inputs: Any, ctx: Any) -> int:
        RAN.append("b")
        SelfCancelling.cancel(ctx.run_id, reason="changed my mind")
        return 2

    @b.undo
    def _undo_b(value: Any, inputs: Any, ctx: Any) -> None:
        RAN.append("undo b")

    @step(after="b")
    def c(inputs: Any, ctx: Any) -> int:
        RAN.append("c")
        return 3


@pytest.fixture
def redis_url(service_url: Callable[[str], str]) -> Iterator[str]:
    yield f"{service_url('redis')}?prefix=rt{uuid.uuid4().hex[:8]}"
    config.reset()


def test_a_sync_run_costs_one_round_trip_per_checkpoint(
    redis_url: str, trips: RoundTrips
) -> None:
    config.configure(storage=redis_url, router="inline://")
    Three.run(n=0)  # connections made, scripts loaded
    result: list[Any] = []
    assert trips.of(lambda: result.append(Three.run(n=1))) == 4  # the start + 3 steps
    assert result[0].value == 4


def test_a_worker_run_costs_its_checkpoints_and_three_requests(
    redis_url: str, trips: RoundTrips
) -> None:
    runtime = config.configure(storage=redis_url, router=redis_url)
    worker = Worker(runtime, liveness_wait=0.0)
    QueuedThree.run(n=0)
    assert worker.run_pending() == 1  # connections made, scripts loaded
    handle: list[Any] = []
    assert trips.of(lambda: handle.append(QueuedThree.run(n=1))) == 2  # save, enqueue
    # receive + lock-with-load + 3 checkpoints (the last releases and announces) + ack, and
    # the empty receive that ends run_pending
    assert trips.of(lambda: worker.run_pending()) == 1 + 1 + 3 + 1 + 1
    assert QueuedThree.find(handle[0].run_id).status is RunStatus.COMPLETED


def test_a_running_run_learns_of_a_cancel_from_its_checkpoints_reply(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fast steps, the default 1 s cancel_check_interval: no boundary reads the request, yet
    the checkpoint recording ``b`` returns it and the run stops before ``c``
    (docs/run-control.md, "Cancel"). Before, ``c`` ran and the run completed."""
    from reactor.engine.run_control.cancel import notice

    config.configure(storage=redis_url, router="inline://")
    reads: list[str] = []
    real = notice._read  # the reads of the step boundaries (cancel and suspend requests)
    monkeypatch.setattr(notice, "_read",
                        lambda state: reads.append(state.ctx.context_id) or real(state))
    RAN.clear()
    outcome = SelfCancelling.run()
    assert not outcome.success
    assert outcome.exception_class == "reactor.errors.RunCancelledError", outcome
    assert "changed my mind" in outcome.message
    assert RAN == ["a", "b", "undo b", "undo a"]  # c never ran; each completed step undone
    assert reads == []  # learned from the append's reply: no read of its own
    assert SelfCancelling.find(outcome.run_id or "").status is RunStatus.CANCELLED


def test_waiting_for_a_finished_run_is_one_round_trip(
    redis_url: str, trips: RoundTrips
) -> None:
    """A finished run's result is one read: no subscription, no pub/sub connection
    (docs/workers.md, "Background runs"). Before, every wait subscribed first: a new TCP
    connection, the SUBSCRIBE and its confirmation, the read, then the unsubscribe."""
    runtime = config.configure(storage=redis_url, router=redis_url)
    worker = Worker(runtime, liveness_wait=0.0)
    QueuedThree.run(n=0)
    assert worker.run_pending() == 1  # connections made, scripts loaded
    handle = QueuedThree.run(n=1)
    assert worker.run_pending() == 1
    outcome: list[Any] = []
    assert trips.of(lambda: outcome.append(handle.wait(5))) == 1
    assert outcome[0].value == 4
