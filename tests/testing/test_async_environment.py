"""The testing kit in async tests (docs/testing.md, "Async tests"): ``async with
TestEnvironment()``, ``await Reactor.arun`` on its runtime and test clock, and the awaitable
job drivers, whose ``async def`` step bodies run on the test's own event loop. Run under the
anyio pytest plugin (asyncio backend) and under a plain ``asyncio.run``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, Reactor, Retries, step
from reactor.model.results import Success
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment

LOOPS: list[asyncio.AbstractEventLoop] = []


class AsyncRetry(Reactor, name="tests.testing.async_retry"):
    """One ``async def`` step that fails twice, 30 s then 60 s apart, then completes."""

    @step(retries=Retries(max_attempts=3, backoff="exponential", base_delay=30))
    async def flaky(inputs: Any, ctx: Any) -> int:
        LOOPS.append(asyncio.get_running_loop())
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return ctx.attempt

    returns = "flaky"


class AsyncBackground(Reactor, name="tests.testing.async_background"):
    """The same step, run by a worker (a queued job in a test environment)."""

    background = Background(all=True)

    @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=30))
    async def flaky(inputs: Any, ctx: Any) -> int:
        LOOPS.append(asyncio.get_running_loop())
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return ctx.attempt

    returns = "flaky"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    LOOPS.clear()
    yield
    LOOPS.clear()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_arun_in_an_async_environment_waits_its_retries_on_the_test_clock() -> None:
    async with TestEnvironment() as env:
        start = env.clock.now()
        out = await AsyncRetry.arun()
        assert isinstance(out, Success) and out.value == 3, out
        assert env.clock.sleeps == [30.0, 60.0]  # no real time passed
        assert env.clock.now() == start + 90
        assert [asyncio.get_running_loop()] * 3 == LOOPS  # the bodies ran on this loop
        view = await AsyncRetry.afind(out.run_id)
        assert view.status is RunStatus.COMPLETED


@pytest.mark.anyio
async def test_the_awaitable_drivers_run_queued_jobs_with_bodies_on_the_tests_loop() -> None:
    async with TestEnvironment() as env:
        handle = await AsyncBackground.arun()
        run_id = handle.run_id
        assert (await AsyncBackground.afind(run_id)).status is not RunStatus.COMPLETED
        assert await env.arun_pending() >= 1  # the first attempt fails: a retry in 30 s
        assert (await AsyncBackground.afind(run_id)).status is RunStatus.RUNNING
        await env.aadvance(30)  # the second attempt fails too
        ran = await env.arun_until_idle()  # the third, 30 s later, completes
        assert ran >= 1
        view = await AsyncBackground.afind(run_id)
        assert view.status is RunStatus.COMPLETED, view.status
        assert view.results["flaky"] == 3
        assert [asyncio.get_running_loop()] * 3 == LOOPS


def test_the_environment_leaves_an_async_test_as_it_found_it() -> None:
    async def main() -> tuple[list[float], Any, list[float]]:
        outer = TestEnvironment()
        async with outer:
            async with TestEnvironment() as inner:
                await AsyncRetry.arun()
                assert inner.clock.sleeps == [30.0, 60.0]
            before = list(outer.clock.sleeps)  # the inner run waited on the inner clock
            out = await AsyncRetry.arun()  # the outer environment is active again
            return before, out, list(outer.clock.sleeps)

    before, out, after = asyncio.run(main())
    assert before == [] and isinstance(out, Success) and after == [30.0, 60.0]
