"""Step heartbeats under attack (docs/concepts.md, "Heartbeats"; reactor/model/heartbeats.py,
reactor/engine/invoke.py, reactor/engine/coroutines.py, reactor/engine/step_runner.py).

Hung bodies (plain and ``async def``), heartbeats from another thread, unstorable and huge
details, heartbeat limits with ``per_attempt``/``total``, retries reading
``ctx.last_heartbeat``, async bodies that block their loop, class-based steps, and a retry
handed to the queue between attempts. A body that must go silent waits on an event nobody
sets before its heartbeat limit (a fraction of a second of real time).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, Retries, Step, StepTimeout, Timeouts
from reactor.dsl import step
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment

#: The heartbeat limit of a body that must go silent (seconds of real time).
_BEAT = 0.1
#: How long a test waits for something that must happen (never reached when it works).
_MEET = 10.0
#: The heartbeat limit of a body that must stay alive, or of an attempt that must answer at
#: once: a loaded machine (two suites on 2 cores) may not schedule a thread for a second or
#: more, so a success must never hang on a tenth of a second of real time.
_ALIVE = 1.5


def test_a_heartbeat_from_a_thread_the_body_started_keeps_it_alive() -> None:
    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE))
        def copy(inputs: Any, ctx: Any) -> int:
            stop = threading.Event()
            beats = [0]

            def pump() -> None:
                while not stop.wait(_BEAT / 5):
                    beats[0] += 1
                    ctx.heartbeat({"n": beats[0]})

            helper = threading.Thread(target=pump)
            helper.start()
            try:
                time.sleep(_ALIVE * 1.5)  # the body itself is silent past its limit
            finally:
                stop.set()
                helper.join()
            return beats[0]

    out = Copy.run()
    assert isinstance(out, Success), out
    assert out.value["copy"] > 1


def test_the_heartbeat_limit_and_per_attempt_each_bound_a_silent_body() -> None:
    hang = threading.Event()

    class Silent(Reactor):
        @step(timeouts=Timeouts(heartbeat=_MEET, per_attempt=_BEAT))
        def call(inputs: Any, ctx: Any) -> None:
            ctx.heartbeat()
            hang.wait(_MEET)

    try:
        began = time.monotonic()
        out = Silent.run()
        took = time.monotonic() - began
    finally:
        hang.set()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "per_attempt" and took < _MEET / 2


def test_heartbeats_never_extend_the_total_limit_over_retries() -> None:
    stop = threading.Event()
    attempts: list[int] = []

    class Chatty(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE, total=_BEAT * 4),
              retries=Retries(max_attempts=10, backoff="fixed", base_delay=0))
        def call(inputs: Any, ctx: Any) -> None:
            attempts.append(ctx.attempt)
            while not stop.wait(_BEAT / 5):
                ctx.heartbeat(ctx.attempt)

    try:
        began = time.monotonic()
        out = Chatty.run()
        took = time.monotonic() - began
    finally:
        stop.set()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "total"
    assert took < _MEET / 2


def test_a_class_step_heartbeats_through_self_context_and_reads_the_last_one() -> None:
    hang = threading.Event()
    seen: list[Any] = []

    class CopyObjects(Step):
        retries = Retries(max_attempts=2, backoff="fixed", base_delay=0)
        timeouts = Timeouts(heartbeat=_ALIVE)

        def run(self) -> str:
            last = self.context.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if last is None:
                self.context.heartbeat({"offset": 7})
                hang.wait(_MEET)
                return "late"
            return f"from {last.details['offset']}"

    class Copy(Reactor):
        copy = step(CopyObjects)

    try:
        out = Copy.run()
    finally:
        hang.set()
    assert isinstance(out, Success), out
    assert out.value["copy"] == "from 7"
    assert seen == [None, ({"offset": 7}, 1)]


def test_an_async_body_that_blocks_its_loop_still_times_out_and_its_value_is_discarded() -> None:
    class Blocking(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT))
        async def call(inputs: Any, ctx: Any) -> str:
            ctx.heartbeat("start")
            time.sleep(_BEAT * 4)  # blocks the loop: the watcher cannot run meanwhile
            return "late"

    out = Blocking.run()
    assert isinstance(out, Failure), out
    assert isinstance(out.error, StepTimeout) and out.error.limit == "heartbeat"


def test_a_hung_async_body_that_swallows_cancellation_still_fails_its_attempt() -> None:
    class Stubborn(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT))
        async def call(inputs: Any, ctx: Any) -> str:
            try:
                await asyncio.sleep(_MEET)
            except asyncio.CancelledError:
                return "swallowed"
            return "late"

    began = time.monotonic()
    out = Stubborn.run()
    assert time.monotonic() - began < _MEET / 2
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    assert out.error.limit == "heartbeat"


def _handed_retry(details: Any) -> tuple[list[Any], RunStatus]:
    """A Background step heartbeats ``details``, fails, and its retry is handed to the queue;
    returns what each attempt read as ``last_heartbeat`` and the run's end status."""
    seen: list[Any] = []
    with TestEnvironment() as env:
        class Copy(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=30))
            def copy(inputs: Any, ctx: Any) -> str:
                last = ctx.last_heartbeat
                seen.append(None if last is None else (last.details, last.attempt))
                if ctx.attempt == 1:
                    ctx.heartbeat(details)
                    raise ConnectionError("flaky")
                return "ok"

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        view = Copy.find(handle.run_id)
    return seen, view.status


def test_unstorable_details_are_dropped_at_the_hand_off_and_the_heartbeat_kept() -> None:
    seen, status = _handed_retry(object())
    assert status is RunStatus.COMPLETED
    assert seen == [None, (None, 1)]


def test_a_self_referencing_details_object_is_dropped_not_a_failed_save() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    seen, status = _handed_retry(loop)
    assert status is RunStatus.COMPLETED
    assert seen == [None, (None, 1)]


def test_huge_details_survive_the_hand_off() -> None:
    big = {"blob": "x" * 1_000_000, "offset": 3}
    seen, status = _handed_retry(big)
    assert status is RunStatus.COMPLETED
    assert seen[1] == (big, 1)


def test_the_kept_heartbeat_is_dropped_when_the_step_ends() -> None:
    with TestEnvironment() as env:
        class Copy(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=30))
            def copy(inputs: Any, ctx: Any) -> str:
                ctx.heartbeat({"attempt": ctx.attempt})
                if ctx.attempt == 1:
                    raise ConnectionError("flaky")
                return "ok"

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        from reactor.engine.checkpoint import load_context
        from reactor.engine.env import make_env

        stored = load_context(make_env(env.runtime), handle.run_id, open_secrets=False)
    assert stored is not None and stored.status is RunStatus.COMPLETED
    assert stored.kept_heartbeat("copy") is None


def test_defect_an_abandoned_attempt_heartbeats_keep_the_next_attempt_alive() -> None:
    released = threading.Event()
    zombie_stop = threading.Event()
    zombie_done = threading.Event()
    hang = threading.Event()
    seen: list[Any] = []

    class Copy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE),
              retries=Retries(max_attempts=3, backoff="fixed", base_delay=0))
        def copy(inputs: Any, ctx: Any) -> str:
            last = ctx.last_heartbeat
            seen.append(None if last is None else (last.details, last.attempt))
            if ctx.attempt == 1:
                ctx.heartbeat("attempt-1 start")
                released.wait(_MEET)  # silent past its limit: abandoned
                # the abandoned attempt wakes up and heartbeats until the run has ended
                while not zombie_stop.wait(_BEAT / 5):
                    ctx.heartbeat("zombie")
                zombie_done.set()
                return "late"
            if ctx.attempt == 2:
                released.set()
                hang.wait(_MEET)  # attempt 2 is silent: it must time out after _ALIVE
                return "late 2"
            return "third"

    try:
        out = Copy.run()
        beating = not zombie_done.is_set()
    finally:
        released.set()
        hang.set()
        zombie_stop.set()
        zombie_done.wait(_MEET)
    assert isinstance(out, Success), out
    # attempt 2 made no heartbeat: what attempt 3 reads is attempt 1's, never a "zombie"
    # beat labelled as attempt 2's
    assert seen[2] == ("attempt-1 start", 1), seen
    # attempt 2 timed out while the zombie was still heartbeating: its beats kept nothing alive
    assert beating


def test_defect_last_heartbeat_at_is_not_on_the_runtime_clock() -> None:
    seen: list[float] = []
    with TestEnvironment() as env:
        class Copy(Reactor):
            @step(retries=Retries(max_attempts=2, backoff="fixed", base_delay=30))
            def copy(inputs: Any, ctx: Any) -> str:
                if ctx.attempt == 1:
                    ctx.heartbeat("x")
                    raise ConnectionError("flaky")
                seen.append(ctx.last_heartbeat.at)
                return "ok"

        began = env.clock.now()
        out = Copy.run()
        ended = env.clock.now()
    assert isinstance(out, Success), out
    assert began <= seen[0] <= ended, (began, seen, ended)


def test_an_async_body_kept_alive_by_heartbeats_from_an_executor_thread() -> None:
    class AsyncCopy(Reactor):
        @step(timeouts=Timeouts(heartbeat=_ALIVE))
        async def copy(inputs: Any, ctx: Any) -> int:
            def work() -> int:
                n = 0
                began = time.monotonic()
                while time.monotonic() - began < _ALIVE * 1.5:
                    n += 1
                    ctx.heartbeat(n)
                    time.sleep(_BEAT / 5)
                return n

            return await asyncio.get_running_loop().run_in_executor(None, work)

    out = AsyncCopy.run()
    assert isinstance(out, Success), out
    assert out.value["copy"] > 1


def test_the_last_heartbeat_outlives_a_silent_attempt_across_two_hand_offs() -> None:
    seen: list[Any] = []
    with TestEnvironment() as env:
        class Copy(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=30))
            def copy(inputs: Any, ctx: Any) -> str:
                last = ctx.last_heartbeat
                seen.append(None if last is None else (last.details, last.attempt))
                if ctx.attempt == 1:
                    ctx.heartbeat({"offset": 11})
                if ctx.attempt < 3:
                    raise ConnectionError("flaky")
                return "ok"

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        view = Copy.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED
    assert seen == [None, ({"offset": 11}, 1), ({"offset": 11}, 1)]


def test_a_hung_body_in_a_worker_times_out_and_its_retry_is_handed_off_with_its_heartbeat(
) -> None:
    hang = threading.Event()
    seen: list[Any] = []
    try:
        with TestEnvironment() as env:
            class Copy(Reactor):
                background = Background(all=True)

                @step(timeouts=Timeouts(heartbeat=_ALIVE),
                      retries=Retries(max_attempts=2, backoff="fixed", base_delay=30))
                def copy(inputs: Any, ctx: Any) -> str:
                    last = ctx.last_heartbeat
                    seen.append(None if last is None else (last.details, last.attempt))
                    if ctx.attempt == 1:
                        ctx.heartbeat({"offset": 5})
                        hang.wait(_MEET)
                        return "late"
                    return "resumed"

            handle = Copy.run()
            assert isinstance(handle, DispatchHandle)
            env.run_until_idle()
            view = Copy.find(handle.run_id)
    finally:
        hang.set()
    assert view.status is RunStatus.COMPLETED and view.results["copy"] == "resumed"
    assert seen == [None, ({"offset": 5}, 1)]


def test_defect_heartbeat_details_with_a_lone_surrogate_strand_the_run() -> None:
    seen, status = _handed_retry({"name": "bad\ud800name"})
    assert status is RunStatus.COMPLETED, (status, seen)
    assert seen == [None, (None, 1)]


def test_defect_a_stubborn_async_body_heartbeating_after_its_cancellation_is_waited_for() -> None:
    from reactor.engine.coroutines import _CANCEL_GRACE

    stop = threading.Event()
    ran_for = _CANCEL_GRACE + 4.0

    class Stubborn(Reactor):
        @step(timeouts=Timeouts(heartbeat=_BEAT))
        async def call(inputs: Any, ctx: Any) -> str:
            began = time.monotonic()
            try:
                await asyncio.sleep(_MEET)  # silent: cancelled at its heartbeat limit
            except asyncio.CancelledError:
                pass
            while time.monotonic() - began < ran_for and not stop.is_set():
                ctx.heartbeat("ignoring the cancellation")
                try:
                    await asyncio.sleep(_BEAT / 5)
                except asyncio.CancelledError:
                    pass
            return "late"

    try:
        began = time.monotonic()
        out = Stubborn.run()
        took = time.monotonic() - began
    finally:
        stop.set()
    assert isinstance(out, Failure) and isinstance(out.error, StepTimeout)
    # given up on _CANCEL_GRACE after its limit, not when the body chose to stop
    assert took < _CANCEL_GRACE + 2.0, took


def test_a_worker_that_cannot_save_between_attempts_retries_from_the_kept_heartbeat() -> None:
    seen: list[Any] = []
    with TestEnvironment() as env:
        class Copy(Reactor):
            background = Background(all=True)

            @step(retries=Retries(max_attempts=4, backoff="fixed", base_delay=30))
            def copy(inputs: Any, ctx: Any) -> str:
                last = ctx.last_heartbeat
                seen.append((ctx.attempt, None if last is None else (last.details, last.attempt)))
                if ctx.attempt == 1:
                    ctx.heartbeat({"offset": 1})
                    raise ConnectionError("flaky")
                if len(seen) == 2:
                    ctx.heartbeat({"offset": 2})
                    # the hand-off save after this attempt fails: its execution is lost
                    env.storage_fails(method="contexts.append", times=1)
                    raise ConnectionError("flaky again")
                return "ok"

        handle = Copy.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        if Copy.find(handle.run_id).status is RunStatus.RUNNING:
            env.clock.advance(env.settings.context_lock_ttl + 5)
            env.sweep()
            env.run_until_idle()
        view = Copy.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED
    # attempt 2's heartbeat was never stored (docs: not written while the attempt runs): the
    # attempt that replaced it reads attempt 1's, kept at the first hand-off
    assert seen[:2] == [(1, None), (2, ({"offset": 1}, 1))]
    assert seen[2] == (2, ({"offset": 1}, 1)), seen
    assert len(seen) == 3


@pytest.mark.parametrize(
    "bad", [float("inf"), -float("inf"), 30 * 86400 + 1, 10**400, None.__class__],
)
def test_unusable_heartbeat_limits_are_refused(bad: Any) -> None:
    from reactor.errors import DefinitionError

    with pytest.raises(DefinitionError, match=r"Timeouts\.heartbeat"):
        Timeouts(heartbeat=bad)


def test_the_largest_heartbeat_limit_is_accepted() -> None:
    assert Timeouts(heartbeat=30 * 86400).heartbeat == 30 * 86400.0
