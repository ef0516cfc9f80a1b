"""``async def`` step bodies and the awaitable API (docs/concepts.md, "Async steps";
reactor/engine/coroutines.py): an async body obeys every rule a plain one does, runs on the
caller's loop under ``arun`` and on reactor's own loop otherwise, and the awaitable API never
blocks the loop that awaits it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, Reactor, Retries, Step, config
from reactor.dsl import Input, input, result, step
from reactor.engine.dispatch import DispatchHandle
from reactor.model.results import Failure, Halt, Success
from reactor.model.signals import fail, halt
from reactor.model.status import RunStatus


class AsyncCharge(Step):
    """An async class step with async undo and compensate that log to ``events``."""

    amount = Input(int)
    events: list[str] = []

    async def run(self) -> int:
        await asyncio.sleep(0)
        if self.inputs.amount < 0:
            raise ValueError("negative amount")
        AsyncCharge.events.append(f"charge {self.inputs.amount}")
        return int(self.inputs.amount)

    async def undo(self) -> None:
        await asyncio.sleep(0)
        AsyncCharge.events.append(f"refund {self.result}")

    async def compensate(self) -> None:
        await asyncio.sleep(0)
        AsyncCharge.events.append(f"compensate {self.inputs.amount}")


@pytest.fixture(autouse=True)
def _clear_events() -> Iterator[None]:
    AsyncCharge.events.clear()
    yield
    AsyncCharge.events.clear()


def test_async_and_plain_steps_mix_and_pass_results_along() -> None:
    class Order(Reactor):
        amount = Input(int)
        charge = step(AsyncCharge, amount=input("amount"))

        @step(charged=result("charge"))
        async def receipt(inputs: Any, ctx: Any) -> str:
            await asyncio.sleep(0)
            return f"paid {inputs.charged}"

        @step(text=result("receipt"))
        def shout(inputs: Any, ctx: Any) -> str:
            return str(inputs.text).upper()

        returns = "shout"

    out = Order.run(amount=7)
    assert isinstance(out, Success) and out.value == "PAID 7"
    assert out.run_id is not None
    assert Order.find(out.run_id).status is RunStatus.COMPLETED
    assert AsyncCharge.events == ["charge 7"]


def test_a_failing_async_step_is_compensated_and_the_completed_ones_undone_newest_first(
    events: list[str],
) -> None:
    class Order(Reactor):
        first = step(AsyncCharge, amount=input("a"))
        second = step(AsyncCharge, amount=input("b"), wait_for=["first"])
        third = step(AsyncCharge, amount=input("c"), wait_for=["second"])
        a = Input(int)
        b = Input(int)
        c = Input(int)

    out = Order.run(a=1, b=2, c=-3)
    assert isinstance(out, Failure) and isinstance(out.error, ValueError)
    assert "negative amount" in (out.traceback or "")
    assert AsyncCharge.events == [
        "charge 1", "charge 2", "compensate -3", "refund 2", "refund 1",
    ]
    assert out.run_id is not None
    assert Order.find(out.run_id).status is RunStatus.FAILED


def test_an_async_step_is_retried_like_a_plain_one(sleeps: list[float]) -> None:
    attempts: list[int] = []

    class Flaky(Reactor):
        @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=0.5))
        async def call(inputs: Any, ctx: Any) -> str:
            attempts.append(1)
            await asyncio.sleep(0)
            if len(attempts) < 3:
                raise ConnectionError("gateway busy")
            return "ok"

        returns = "call"

    out = Flaky.run()
    assert isinstance(out, Success) and out.value == "ok"
    assert len(attempts) == 3
    assert sleeps == [0.5, 0.5]


def test_signals_raised_inside_an_async_body_end_the_step_as_from_a_plain_one() -> None:
    class Refused(Reactor):
        @step()
        async def check(inputs: Any, ctx: Any) -> None:
            await asyncio.sleep(0)
            fail("card declined", retryable=False)

    class Stopped(Reactor):
        @step()
        async def check(inputs: Any, ctx: Any) -> None:
            await asyncio.sleep(0)
            halt("nothing to do")

    refused = Refused.run()
    assert isinstance(refused, Failure) and "card declined" in str(refused.error)
    assert isinstance(Stopped.run(), Halt)


def test_synchronous_runs_share_one_reactor_loop_across_steps_and_runs() -> None:
    """A loop-bound object made in one async step is usable in the next, and in the next run:
    every async body of a synchronous run runs on reactor's one loop."""
    seen: list[asyncio.AbstractEventLoop] = []
    queue: list[asyncio.Queue[int]] = []

    class Loops(Reactor):
        @step()
        async def make(inputs: Any, ctx: Any) -> None:
            seen.append(asyncio.get_running_loop())
            queue.append(asyncio.Queue())
            await queue[-1].put(1)

        @step(wait_for=["make"])
        async def use(inputs: Any, ctx: Any) -> int:
            seen.append(asyncio.get_running_loop())
            return await queue[-1].get()

        returns = "use"

    assert Loops.run().value == 1
    assert Loops.run().value == 1
    assert len(seen) == 4 and all(loop is seen[0] for loop in seen)
    assert threading.current_thread() is threading.main_thread()


def test_arun_runs_async_bodies_on_the_awaiting_loop_and_never_blocks_it() -> None:
    """The sync step below blocks until the awaiting loop itself sets the event: if ``arun``
    ran the engine on that loop, the event could never be set and the run would time out."""
    ran_on: list[asyncio.AbstractEventLoop] = []
    unblocked = threading.Event()

    class Mixed(Reactor):
        @step()
        def wait_for_the_loop(inputs: Any, ctx: Any) -> bool:
            return unblocked.wait(timeout=10)

        @step(ok=result("wait_for_the_loop"))
        async def on_loop(inputs: Any, ctx: Any) -> bool:
            ran_on.append(asyncio.get_running_loop())
            return bool(inputs.ok)

        returns = "on_loop"

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        loop = asyncio.get_running_loop()
        pending = asyncio.ensure_future(Mixed.arun())
        await asyncio.sleep(0)
        unblocked.set()  # set by a coroutine of this loop, while arun is pending
        return await pending, loop

    out, loop = asyncio.run(main())
    assert isinstance(out, Success) and out.value is True
    assert ran_on == [loop]


def test_the_awaitable_run_control_methods_match_the_blocking_ones() -> None:
    class Order(Reactor):
        amount = Input(int)
        charge = step(AsyncCharge, amount=input("amount"))

    async def main() -> None:
        done = await Order.arun(amount=5)
        assert isinstance(done, Success) and done.run_id is not None
        assert (await Order.afind(done.run_id)).status is RunStatus.COMPLETED
        undone = await Order.aundo(done.run_id)
        assert isinstance(undone, Success)
        assert (await Order.afind(done.run_id)).status is RunStatus.CANCELLED
        failed = await Order.aexecute({"amount": -1})
        assert isinstance(failed, Failure) and failed.run_id is not None
        again = await Order.aretry(failed.run_id)
        assert isinstance(again, Failure) and again.run_id != failed.run_id
        handle = DispatchHandle(run_id=done.run_id, job_id="j", reactor=Order.definition.name)
        waited = await handle.wait_async(timeout=5)
        assert isinstance(waited, Failure)  # undone: the run's stored outcome is its cancel

    asyncio.run(main())
    assert AsyncCharge.events == ["charge 5", "refund 5", "compensate -1", "compensate -1"]


def test_a_blocking_run_called_from_an_async_step_fails_that_step_clearly() -> None:
    """``Inner.run()`` inside an async body would wait for the loop it blocks: the inner
    async step fails with a message naming the awaitable API instead of hanging."""

    class Inner(Reactor):
        @step()
        async def leaf(inputs: Any, ctx: Any) -> int:
            return 1

        returns = "leaf"

    class Outer(Reactor):
        @step()
        async def call_inner(inputs: Any, ctx: Any) -> Any:
            inner = Inner.run()
            assert isinstance(inner, Failure)
            return str(inner.error)

        @step()
        async def await_inner(inputs: Any, ctx: Any) -> Any:
            return (await Inner.arun()).value

    out = Outer.run()
    assert isinstance(out, Success)
    assert "arun" in out.value["call_inner"]
    assert out.value["await_inner"] == 1


def test_step_call_runs_an_async_body() -> None:
    out = AsyncCharge.call({"amount": 3})
    assert isinstance(out, Success) and out.value == 3
    assert AsyncCharge.events == ["charge 3"]


class Background_(Reactor, name="test_async_steps.background"):
    amount = Input(int)
    background = Background(all=True)
    charge = step(AsyncCharge, amount=input("amount"))
    returns = "charge"


def test_a_worker_runs_async_steps_of_a_background_run() -> None:
    config.reset()
    config.configure(router="local://")
    try:
        handle = Background_.run(amount=9)
        assert isinstance(handle, DispatchHandle)
        out = asyncio.run(handle.wait_async(timeout=20))
        assert isinstance(out, Success) and out.value == 9
    finally:
        config.reset()
