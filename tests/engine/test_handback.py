"""Waits that hand the thread back (reactor/engine/handback.py; docs/workers.md, "Async
slots"): without a bound handback every wait blocks as before; with one, a wait suspends
through it and is resumed by its waker or its time, and a handback that cannot suspend the
caller (another thread) is never used."""

from __future__ import annotations

import threading
from collections.abc import Callable

from reactor.engine import handback


class Recorder:
    """A handback that records what it is asked; ``on_suspend`` plays the host's part."""

    def __init__(self, on_suspend: Callable[[object, float | None], None],
                 usable: bool = True) -> None:
        self.on_suspend = on_suspend
        self.is_usable = usable
        self.suspended: list[tuple[object, float | None]] = []
        self.wakers: list[object] = []

    def usable(self) -> bool:
        return self.is_usable

    def waker(self, source: object) -> Callable[[], None]:
        self.wakers.append(source)
        return lambda: None

    def suspend(self, source: object, seconds: float | None) -> None:
        self.suspended.append((source, seconds))
        self.on_suspend(source, seconds)


def test_without_a_handback_waits_block_as_before() -> None:
    done = threading.Event()
    done.set()
    assert handback.current() is None
    assert handback.wait_event(done, lambda wake: None, 0.0)
    assert not handback.wait_event(threading.Event(), lambda wake: None, 0.0)
    slept: list[float] = []
    handback.sleeper(slept.append)(2.5)
    assert slept == [2.5]


def test_a_wait_suspends_through_the_bound_handback_until_its_event_is_set() -> None:
    done = threading.Event()
    subscribed: list[Callable[[], None]] = []
    host = Recorder(lambda source, seconds: done.set())  # the body ended meanwhile
    with handback.bound(host):
        assert handback.current() is host
        assert handback.wait_event(done, subscribed.append, 0.25)
    assert host.suspended == [(done, 0.25)] and host.wakers == [done]
    assert len(subscribed) == 1  # the setter wakes the suspended waiter
    assert handback.current() is None  # unbound after the block


def test_a_retry_wait_suspends_instead_of_sleeping() -> None:
    slept: list[float] = []
    host = Recorder(lambda source, seconds: None)
    with handback.bound(host):
        handback.sleeper(slept.append)(0.01)
    assert slept == []  # never the blocking sleep
    assert host.suspended and all(seconds is not None and seconds <= 0.01
                                  for _, seconds in host.suspended)
    assert len({id(source) for source, _ in host.suspended}) == 1  # one wait, one source


def test_a_handback_that_cannot_suspend_the_caller_is_not_used() -> None:
    host = Recorder(lambda source, seconds: None, usable=False)
    slept: list[float] = []
    with handback.bound(host):
        assert handback.current() is None
        assert not handback.wait_event(threading.Event(), lambda wake: None, 0.0)
        handback.sleeper(slept.append)(1.0)
    assert host.suspended == [] and slept == [1.0]
