"""The shared heartbeat scheduler (reactor/coordination/_heartbeat.py).

Every wait below is on an event another thread sets, with a generous timeout that only bounds a
failing test; no assertion depends on how long something takes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import pytest

from reactor.coordination import _heartbeat
from reactor.coordination._heartbeat import MAX_RENEW_THREADS, Heartbeat

TICK = 0.001  # the interval of heartbeats that should renew as fast as they can
LONG = 3600.0  # the interval of heartbeats that must never renew during a test
TIMEOUT = 10.0  # bounds a failing wait


class Counter:
    """A renew function counting its calls; ``reached(n)`` waits until it was called n times."""

    def __init__(self, answer: bool = True) -> None:
        self.calls = 0
        self.answer = answer
        self._cond = threading.Condition()

    def __call__(self) -> bool:
        with self._cond:
            self.calls += 1
            self._cond.notify_all()
        return self.answer

    def reached(self, n: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.calls >= n, timeout=TIMEOUT)


def scheduler_ran_more_cycles() -> None:
    """Return once the scheduler has renewed another heartbeat several times (so any renew
    still due for a stopped heartbeat would have happened by now)."""
    probe = Counter()
    beat = Heartbeat("probe", TICK, probe).start()
    try:
        assert probe.reached(3)
    finally:
        beat.stop()


def test_renews_on_the_interval_until_stopped_and_never_after() -> None:
    renew = Counter()
    beat = Heartbeat("t", TICK, renew).start()
    assert renew.reached(3)
    beat.stop()
    calls = renew.calls
    scheduler_ran_more_cycles()
    assert renew.calls == calls


def test_first_renew_waits_one_interval() -> None:
    renew = Counter()
    beat = Heartbeat("t", LONG, renew).start()
    scheduler_ran_more_cycles()
    beat.stop()
    assert renew.calls == 0


def test_a_lost_lease_calls_on_lost_once_and_stops_renewing() -> None:
    renew = Counter(answer=False)
    lost = threading.Event()
    lost_calls: list[bool] = []

    def on_lost() -> None:
        lost_calls.append(True)
        lost.set()

    Heartbeat("t", TICK, renew, on_lost).start()
    assert lost.wait(TIMEOUT)
    scheduler_ran_more_cycles()
    assert renew.calls == 1 and lost_calls == [True]


def test_a_renew_error_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    answers: list[object] = [RuntimeError("connection reset"), True]
    renewed = Counter()

    def renew() -> bool:
        if answers:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
        return renewed()

    with caplog.at_level(logging.WARNING, logger="reactor.coordination"):
        beat = Heartbeat("flaky", TICK, renew).start()
        assert renewed.reached(2)
        beat.stop()
    assert any("renew_error name=flaky" in r.getMessage() for r in caplog.records)


def test_a_slow_renew_does_not_hold_up_other_heartbeats() -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck() -> bool:
        entered.set()
        release.wait(TIMEOUT)
        return True

    slow = Heartbeat("slow", TICK, stuck).start()
    try:
        assert entered.wait(TIMEOUT)
        other = Counter()
        beat = Heartbeat("other", TICK, other).start()
        assert other.reached(5)  # while "slow" is still inside its renew
        assert not release.is_set()
        beat.stop()
    finally:
        release.set()
        slow.stop()


def run_in_thread(fn: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_stop_waits_for_a_renew_in_progress() -> None:
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def renew() -> bool:
        entered.set()
        release.wait(TIMEOUT)
        order.append("renew done")
        return True

    beat = Heartbeat("t", TICK, renew).start()
    assert entered.wait(TIMEOUT)
    stopped = threading.Event()

    def stop() -> None:
        beat.stop()
        order.append("stop returned")
        stopped.set()

    stopper = run_in_thread(stop)
    assert not stopped.wait(0.05)  # still inside renew: stop has not returned
    release.set()
    stopper.join(TIMEOUT)
    assert order == ["renew done", "stop returned"]


def test_stop_during_a_renew_that_loses_the_lease_suppresses_on_lost() -> None:
    entered, release = threading.Event(), threading.Event()
    lost: list[bool] = []

    def renew() -> bool:
        entered.set()
        release.wait(TIMEOUT)
        return False  # e.g. the holder released the lock meanwhile

    beat = Heartbeat("t", TICK, renew, lambda: lost.append(True)).start()
    assert entered.wait(TIMEOUT)
    stopper = run_in_thread(beat.stop)
    release.set()
    stopper.join(TIMEOUT)
    scheduler_ran_more_cycles()
    assert lost == []


def test_stop_from_inside_renew_and_on_lost_does_not_deadlock() -> None:
    box: list[Heartbeat] = []
    calls = Counter()

    def renew() -> bool:
        calls()
        box[0].stop()
        return True

    box.append(Heartbeat("self-stop", TICK, renew).start())
    assert calls.reached(1)
    scheduler_ran_more_cycles()
    assert calls.calls == 1

    lost = threading.Event()
    holder: list[Heartbeat] = []

    def on_lost() -> None:
        holder[0].stop()
        lost.set()

    holder.append(Heartbeat("lost-stop", TICK, lambda: False, on_lost).start())
    assert lost.wait(TIMEOUT)


def test_a_failing_on_lost_is_logged_and_the_scheduler_keeps_going(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_lost() -> None:
        raise RuntimeError("callback bug")

    renew = Counter(answer=False)
    with caplog.at_level(logging.ERROR, logger="reactor.coordination"):
        Heartbeat("bad-callback", TICK, renew, on_lost).start()
        assert renew.reached(1)
        scheduler_ran_more_cycles()
    assert any("on_lost_error name=bad-callback" in r.getMessage() for r in caplog.records)


def test_start_twice_is_refused_and_stop_is_idempotent() -> None:
    beat = Heartbeat("t", LONG, Counter()).start()
    with pytest.raises(RuntimeError, match="already started"):
        beat.start()
    beat.stop()
    beat.stop()
    Heartbeat("never-started", LONG, Counter()).stop()


def test_a_stopped_heartbeat_never_starts() -> None:
    renew = Counter()
    beat = Heartbeat("t", TICK, renew)
    beat.stop()
    beat.start()
    scheduler_ran_more_cycles()
    assert renew.calls == 0


def test_many_heartbeats_share_a_bounded_number_of_threads() -> None:
    counters = [Counter() for _ in range(20)]
    beats = [Heartbeat(f"t{i}", TICK, c).start() for i, c in enumerate(counters)]
    try:
        assert all(c.reached(2) for c in counters)
        names = [t.name for t in threading.enumerate() if t.name.startswith("reactor-heartbeat")]
        assert names.count("reactor-heartbeat-timer") == 1
        assert 1 <= names.count("reactor-heartbeat-renew") <= MAX_RENEW_THREADS
    finally:
        for beat in beats:
            beat.stop()


def test_stopped_heartbeats_do_not_accumulate_in_the_schedule() -> None:
    for i in range(500):
        Heartbeat(f"short-{i}", LONG, Counter()).start().stop()
    scheduler = _heartbeat._scheduler()
    assert len(scheduler._heap) < 2 * _heartbeat._COMPACT_MIN


def test_run_drives_the_loop_in_the_calling_thread() -> None:
    renew = Counter()
    ticks = iter([False, False, True])
    Heartbeat("t", 0.0, renew).run(wait=lambda _: next(ticks))
    assert renew.calls == 2

    beat = Heartbeat("t", LONG, renew)
    beat.stop()
    beat.run()  # default wait: the stop signal, already set
    assert renew.calls == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_scheduler() -> None:
    parent_scheduler = _heartbeat._scheduler()
    parent_beat = Heartbeat("parent", LONG, Counter()).start()
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when a heartbeat renews here
        code = 1
        try:
            parent_beat.stop()  # must not touch the parent's scheduler
            renew = Counter()
            beat = Heartbeat("child", TICK, renew).start()
            if renew.reached(2) and _heartbeat._scheduler() is not parent_scheduler:
                code = 0
            beat.stop()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    parent_beat.stop()
    assert os.waitstatus_to_exitcode(status) == 0
    assert _heartbeat._scheduler() is parent_scheduler
