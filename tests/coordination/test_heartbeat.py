"""The shared heartbeat scheduler (reactor/coordination/heartbeat.py).

Every wait below is on an event another thread sets, with a generous timeout that only bounds a
failing test; no assertion depends on how long something takes. A lease's deadline is kept on
an injected clock (:class:`LeaseClock`) wherever the outcome would otherwise depend on how soon
the scheduler's threads get the CPU: on a loaded machine a real 0.3 s lease can lapse before
its first renewal (docs/coordination.md, "Renewal and loss").
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import pytest

from reactor.coordination import heartbeat as _heartbeat
from reactor.coordination.heartbeat import MAX_RENEW_THREADS, Heartbeat
from reactor.model.coordination import renewal

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


def holds(predicate: Callable[[], bool]) -> bool:
    """Wait until ``predicate`` holds (it turns true on another thread); False after TIMEOUT."""
    done = threading.Event()
    for _ in range(int(TIMEOUT / 0.001)):
        if predicate():
            return True
        done.wait(0.001)
    return predicate()


class LeaseClock:
    """The clock a lease's deadline is kept on, moved only by the test (thread-safe reads)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


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
    # release the renew only once stop() has marked the beat stopped (it then waits for it)
    assert holds(lambda: beat._stopped)
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
        # on_lost runs on a scheduler thread after the renew returned: wait for its log line
        # (a probe, not the scheduler's order: under load the next cycles may come first)
        assert holds(lambda: any(
            "on_lost_error name=bad-callback" in r.getMessage() for r in list(caplog.records)
        ))
        scheduler_ran_more_cycles()


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


# ------------------------------------------------------------------ the renewal policy


class FakeClock:
    """A monotonic clock that moves only when the loop under test waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def scripted(answers: list[object], clock: FakeClock, calls: list[float]) -> Callable[[], bool]:
    """A renew answering ``answers`` in turn (an Exception is raised) and logging the call
    times; once the script is used up it raises ``KeyboardInterrupt`` to end a ``run()``."""

    def renew() -> bool:
        calls.append(clock.now)
        if not answers:
            raise KeyboardInterrupt  # ends the test loop (not an Exception: not retried)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return bool(answer)

    return renew


def test_errors_inside_the_lease_are_retried_promptly_and_keep_it() -> None:
    clock, calls, lost = FakeClock(), [], []
    renew = scripted([OSError("reset"), OSError("reset"), True, True], clock, calls)
    beat = Heartbeat("t", 1 / 3, renew, lambda: lost.append(True), lease=1.0, clock=clock,
                     jitter=lambda: 1.0)
    with pytest.raises(KeyboardInterrupt):
        beat.run(wait=clock.wait)
    assert lost == [] and not beat.lost
    # First renewal after lease/3, then retries 50 ms and 100 ms later (not a whole interval).
    assert clock.waits[:4] == pytest.approx([1 / 3, 0.05, 0.1, 1 / 3])
    assert calls[2] < 1.0  # the successful retry came well inside the 1 s lease
    assert beat.deadline == pytest.approx(calls[3] + 1.0)


def test_errors_until_the_deadline_lose_the_lease_once() -> None:
    clock, calls, lost = FakeClock(), [], []
    beat = Heartbeat("t", 1 / 3, scripted([OSError("down")] * 100, clock, calls),
                     lambda: lost.append(True), lease=1.0, clock=clock, jitter=lambda: 1.0)
    beat.run(wait=clock.wait)
    assert lost == [True] and beat.lost and beat.expired()
    assert beat.lost_reason is not None and "deadline" in beat.lost_reason
    assert len(calls) >= 4 and all(t < 1.0 for t in calls)  # several tries inside the lease


def test_retry_delays_never_outlast_the_lease() -> None:
    for failures in range(1, 12):
        for left in (0.9, 0.3, 0.05, 0.0):
            delay = renewal.retry_delay(failures, left, 1 / 3, 1.0)
            assert renewal.RETRY_FLOOR <= delay <= max(left / 4, renewal.RETRY_FLOOR)
    assert renewal.retry_delay(1, 30.0, 10.0, 0.5) == pytest.approx(0.025)
    assert renewal.retry_delay(20, 30.0, 10.0, 1.0) == pytest.approx(7.5)


def test_a_renew_hung_past_the_deadline_is_reported_at_the_deadline() -> None:
    entered, release, lost = threading.Event(), threading.Event(), threading.Event()
    clock = LeaseClock()

    def hung() -> bool:
        clock.now = 0.3  # the lease's deadline passes while this call hangs
        entered.set()
        release.wait(TIMEOUT)
        return True

    # the deadline is on ``clock``: however late the scheduler gets to the first renewal, the
    # lease is still held when the renew call starts
    beat = Heartbeat("hung", 0.05, hung, lost.set, lease=0.3, clock=clock).start()
    try:
        assert entered.wait(TIMEOUT)
        assert lost.wait(TIMEOUT), "on_lost must fire at the deadline"
        assert not release.is_set()  # ...while the renew call is still hanging
        assert beat.lost and beat.expired()
    finally:
        release.set()
        beat.stop()


def test_a_healthy_short_lease_is_never_lost() -> None:
    lease = 0.3
    interval = renewal.renew_interval(lease)
    clock = LeaseClock()
    renew = Counter()
    lost: list[bool] = []
    starts: list[float] = []

    def on_time() -> bool:
        # every renewal comes exactly one interval after the last on the lease's clock, however
        # late the real scheduler thread runs on a loaded machine
        starts.append(clock.now)
        clock.now += interval
        return renew()

    beat = Heartbeat("short", interval, on_time, lambda: lost.append(True), lease=lease,
                     clock=clock).start()
    try:
        assert renew.reached(6)  # two whole leases of renewals
        assert not beat.expired() and lost == []
    finally:
        beat.stop()
    assert starts[:6] == pytest.approx([i * interval for i in range(6)])
    # the deadline moved on with each renewal (the one stop() cut short may not count)
    assert beat.deadline is not None and beat.deadline >= starts[4] + lease - 1e-9


def test_lease_validation_and_polling_backoff() -> None:
    assert renewal.renew_interval(1.0) == pytest.approx(1 / 3)
    assert renewal.validate_lease("x", 1) == 1.0
    for bad in (0.5, 0, -1, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="x must be a finite number of seconds >= 1"):
            renewal.validate_lease("x", bad)  # type: ignore[arg-type]
    delays = [renewal.poll_delay(n, 100.0, 1.0) for n in range(1, 10)]
    assert delays[:5] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8])
    assert max(delays) == renewal.POLL_MAX
    assert renewal.poll_delay(5, 0.01, 1.0) == pytest.approx(0.01)
